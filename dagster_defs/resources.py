"""The resource set of the deployment ``CTXPREC_DEPLOYMENT`` names (``local``: SQLite by default;
``production``: the warehouse URL and judge key required from the environment)."""

from ctxprec_ops.dagster import resources_for

resources = resources_for()
