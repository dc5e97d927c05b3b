"""The multi-seed credit-assignment study (``slca study``): paired runs of several estimators from
one SFT start, with exact tests and intervals over seeds (docs/study.md).

Its doors: ``plan.StudyPlan`` (what runs), ``runner.run_study`` (train what is not finished, then
report), ``report.write_study_report``. Beside them the statistics (``stats``), the report's tables
and charts, the noise levels and arms, the pre-registered primary outcome (``outcomes``) and BFCL scoring.
"""
