"""Google Cloud credentials for the contrib modules that call Google's JSON APIs through googleapiclient.

google-auth comes with google-api-python-client (the ``bigquery`` and ``gcs`` extras), imported only when
credentials are looked for.
"""

from __future__ import annotations

import logging
from typing import Any

from luigi.contrib.optional import require

__all__ = ["get_authenticate_kwargs"]

logger = logging.getLogger("luigi-interface")

_FEATURE = "luigi.contrib.gcp"
_PACKAGE = "google-api-python-client"


def get_authenticate_kwargs(oauth_credentials: Any = None, http_: Any = None) -> dict[str, Any]:
    """The keyword that authenticates a ``googleapiclient`` client: the given credentials, else the given
    ``httplib2.Http``, else Google's application default credentials, else an unauthenticated ``Http``."""
    if oauth_credentials:
        return {"credentials": oauth_credentials}
    if http_:
        return {"http": http_}
    google_auth = require("google.auth", "bigquery", _FEATURE, _PACKAGE)
    auth_errors = require("google.auth.exceptions", "bigquery", _FEATURE, _PACKAGE)
    try:
        credentials, _project = google_auth.default()
    except auth_errors.DefaultCredentialsError:
        # Luigi goes on unauthenticated: public data and emulators still answer.
        logger.warning(
            "No Google credentials found (GOOGLE_APPLICATION_CREDENTIALS); calling unauthenticated"
        )
        httplib2 = require("httplib2", "bigquery", _FEATURE, _PACKAGE)
        return {"http": httplib2.Http()}
    return {"credentials": credentials}
