"""The remember path: safety scan, neighbours, the judge's questions, the decision rules, the append."""
