#!/usr/bin/env python3
"""Verify JWS with Apple's official App Store Server Library (PyPI app-store-server-library).

Usage: apple_library_verify.py ROOT_DER BUNDLE_ID ENVIRONMENT KIND=FILE ...
KIND is transaction, renewal, notification, app or realtime (a Get Retention Message request). Prints one JSON object per input with the decoded fields,
or {"error": "..."} when Apple's verifier rejects it. Used by the StoreSimulator tests: anything Apple's library
rejects is a simulator bug.
"""
import json
import sys

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException


def plain(value):
    """attrs models and enums to JSON-able values."""
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return value.value
    if hasattr(value, "__attrs_attrs__"):
        return {a.name: plain(getattr(value, a.name)) for a in value.__attrs_attrs__
                if getattr(value, a.name) is not None and not a.name.startswith("raw")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main():
    root_path, bundle_id, environment = sys.argv[1:4]
    with open(root_path, "rb") as f:
        root = f.read()
    verifier = SignedDataVerifier([root], False, Environment(environment), bundle_id, 1234567890)
    methods = {
        "transaction": verifier.verify_and_decode_signed_transaction,
        "renewal": verifier.verify_and_decode_renewal_info,
        "notification": verifier.verify_and_decode_notification,
        "app": verifier.verify_and_decode_app_transaction,
        "realtime": verifier.verify_and_decode_realtime_request,
    }
    for argument in sys.argv[4:]:
        kind, path = argument.split("=", 1)
        with open(path) as f:
            jws = f.read().strip()
        try:
            print(json.dumps(plain(methods[kind](jws)), sort_keys=True, default=str))
        except VerificationException as error:
            print(json.dumps({"error": str(error.status)}))


if __name__ == "__main__":
    main()
