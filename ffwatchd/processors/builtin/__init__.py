"""The built-in processors, one module each; the registry finds every module here."""
