#!/usr/bin/env python3
"""Drive Apple's official App Store Server API client (PyPI app-store-server-library) against a base URL.

Usage: apple_library_api.py BASE_URL KEY_PEM KEY_ID ISSUER_ID BUNDLE_ID TRANSACTION_ID ORIGINAL_TRANSACTION_ID
Prints one JSON object: what each call returned (or the APIException it raised). Used by the StoreSimulator tests:
anything Apple's client cannot parse or rejects is a simulator bug.
"""
import json
import sys
import uuid

from appstoreserverlibrary.api_client import APIException, AppStoreServerAPIClient, GetTransactionHistoryVersion
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.ExtendRenewalDateRequest import ExtendRenewalDateRequest
from appstoreserverlibrary.models.ExtendReasonCode import ExtendReasonCode
from appstoreserverlibrary.models.TransactionHistoryRequest import ProductType, TransactionHistoryRequest
from appstoreserverlibrary.models.UpdateAppAccountTokenRequest import UpdateAppAccountTokenRequest


def call(results, name, function):
    try:
        results[name] = function()
    except APIException as error:
        results[name] = {"httpStatus": error.http_status_code, "apiError": error.raw_api_error, "message": error.error_message}
    except Exception as error:  # anything else is a parse failure on Apple's side: the simulator's bug
        results[name] = {"exception": repr(error)}


def main():
    base, key_path, key_id, issuer, bundle, transaction_id, original_id = sys.argv[1:8]
    with open(key_path, "rb") as f:
        key = f.read()
    client = AppStoreServerAPIClient(key, key_id, issuer, bundle, Environment.SANDBOX)
    client._base_url = base
    results = {}
    call(results, "transaction", lambda: {"signed": client.get_transaction_info(transaction_id).signedTransactionInfo})
    call(results, "missingTransaction", lambda: client.get_transaction_info("9999999999999999"))

    def history():
        pages, revision = [], None
        while True:
            response = client.get_transaction_history(transaction_id, revision, TransactionHistoryRequest(), GetTransactionHistoryVersion.V2)
            pages.append(len(response.signedTransactions))
            revision = response.revision
            if not response.hasMore:
                return {"pages": pages, "environment": response.environment.value if response.environment else None}
    call(results, "history", history)
    call(results, "historyConsumables", lambda: len(client.get_transaction_history(
        transaction_id, None, TransactionHistoryRequest(productTypes=[ProductType.CONSUMABLE]), GetTransactionHistoryVersion.V2).signedTransactions))

    def statuses():
        response = client.get_all_subscription_statuses(original_id)
        return [{"group": g.subscriptionGroupIdentifier, "statuses": [t.status.value for t in g.lastTransactions]} for g in response.data]
    call(results, "statuses", statuses)
    call(results, "refunds", lambda: len(client.get_refund_history(transaction_id, None).signedTransactions))
    call(results, "extend", lambda: client.extend_subscription_renewal_date(original_id, ExtendRenewalDateRequest(
        extendByDays=3, extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=str(uuid.uuid4()))).success)
    call(results, "badExtend", lambda: client.extend_subscription_renewal_date(original_id, ExtendRenewalDateRequest(
        extendByDays=91, extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=str(uuid.uuid4()))))
    call(results, "setToken", lambda: client.set_app_account_token(original_id, UpdateAppAccountTokenRequest(appAccountToken=str(uuid.uuid4()))) or "ok")
    call(results, "lookup", lambda: client.look_up_order_id("SIM" + transaction_id).status.value)
    print(json.dumps(results, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
