"""``ctxprec demo``: the generated sample warehouse (``sample``) and the job that scores it (``job``)."""
