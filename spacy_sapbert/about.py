__title__ = "spacy-sapbert"
__version__ = "0.1.0"
