"""The demo's defaults (light: the CLI's ``--help`` reads them without loading the demo job)."""

DEFAULT_DEMO_URL = "sqlite:///ctxprec_demo.db"
DEFAULT_REPORT = "ctxprec_report.html"
#: the demo's judge unless the caller names another: offline, whatever OPENAI_API_KEY or
#: CTXPREC_JUDGE say (a demo never spends money or waits on an endpoint it was not asked to use)
DEMO_JUDGE = "lexical"
