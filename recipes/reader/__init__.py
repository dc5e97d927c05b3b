"""The reader recipe: the corpus, pretraining and probes that build the shipped "reader" model.

``corpus`` (the documents), ``invented_tools`` and ``words`` (what they are made of), ``pretrain``
(the loop and its command line, ``python -m recipes.reader.pretrain``), ``chunked_loss`` (its loss)
and ``probes`` (what a build is measured by). README.md says how to build a reader.
"""
