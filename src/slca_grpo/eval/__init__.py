"""Evaluation harnesses: in-domain, BFCL and tau2-Bench."""
