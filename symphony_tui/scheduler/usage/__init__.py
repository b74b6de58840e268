"""Token usage: the totals of the live sessions (``tokens.TokenLedger``), the token
budgets that hold a run (``budgets``), and the crash-proof usage ledger on disk
(``ledger.UsageLedger``, its records in ``book``)."""
