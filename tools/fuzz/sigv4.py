"""SigV4 for `execute-api`, as the platform's backend signs its admin API requests."""

import os

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def sign(method: str, url: str, body: bytes | None, headers: dict) -> dict:
    """The headers to send: `headers` plus the signature over the exact bytes sent."""
    credentials = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
    SigV4Auth(credentials, "execute-api", os.environ.get("AWS_REGION", "us-east-1")).add_auth(request)
    return dict(request.headers.items())
