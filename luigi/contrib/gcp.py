"""Google Cloud credentials for the contrib modules that call Google's JSON APIs (``gcs``, ``bigquery``).

Needs google-auth and google-api-python-client (the ``gcs`` and ``bigquery`` extras bring them), imported
when credentials are looked for.
"""

from __future__ import annotations

import logging
from typing import Any

from luigi.contrib.optional import require

__all__ = ["get_authenticate_kwargs"]

logger = logging.getLogger("luigi-interface")

_FEATURE = "luigi.contrib.gcp"


def get_authenticate_kwargs(oauth_credentials: Any = None, http_: Any = None) -> dict[str, Any]:
    """The keyword arguments that authenticate a ``googleapiclient`` client: the given credentials, else the
    given ``httplib2.Http``, else Google's application default credentials, else an anonymous
    ``Http`` (googleapiclient's ``build_http``)"""
    if oauth_credentials:
        return {"credentials": oauth_credentials}
    if http_:
        return {"http": http_}
    google_auth = require("google.auth", "gcs", _FEATURE, "google-auth")
    auth_errors = require("google.auth.exceptions", "gcs", _FEATURE, "google-auth")
    try:
        credentials, _project = google_auth.default()
    except auth_errors.DefaultCredentialsError:
        # No credentials anywhere: public buckets still answer anonymous requests.
        logger.warning(
            "No Google credentials found (GOOGLE_APPLICATION_CREDENTIALS); calling unauthenticated"
        )
        http = require("googleapiclient.http", "gcs", _FEATURE, "google-api-python-client")
        return {"http": http.build_http()}  # an httplib2.Http that leaves 308 to resumable uploads
    return {"credentials": credentials}
