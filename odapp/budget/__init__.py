"""The Privacy budget page: its cached exact budgets."""
