#!/usr/bin/env python3
"""Drive Apple's official App Store Server API client (PyPI app-store-server-library) against a base URL.

Usage: apple_library_api.py BASE_URL KEY_PEM KEY_ID ISSUER_ID BUNDLE_ID TRANSACTION_ID ORIGINAL_TRANSACTION_ID
                            [RENEWAL_ID FAMILY_COPY_ID CONSUMABLE_ID PRODUCT_ID]
Prints one JSON object: what each call returned (or the APIException it raised). Used by the StoreSimulator tests:
anything Apple's client cannot parse or rejects is a simulator bug.
"""
import base64
import json
import sys
import uuid

from appstoreserverlibrary.api_client import APIException, AppStoreServerAPIClient, GetTransactionHistoryVersion
from appstoreserverlibrary.models.ConsumptionRequest import ConsumptionRequest
from appstoreserverlibrary.models.DeliveryStatus import DeliveryStatus
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.RefundPreference import RefundPreference
from appstoreserverlibrary.models.ExtendRenewalDateRequest import ExtendRenewalDateRequest
from appstoreserverlibrary.models.ExtendReasonCode import ExtendReasonCode
from appstoreserverlibrary.models.MassExtendRenewalDateRequest import MassExtendRenewalDateRequest
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
    if len(sys.argv) > 11:
        more(client, results, transaction_id, *sys.argv[8:12])
    print(json.dumps(results, sort_keys=True, default=str))


def more(client, results, transaction_id, renewal_id, family_copy_id, consumable_id, product_id):
    """The endpoints of API 1.12-1.21 and the error codes Apple gives on the paths around them."""
    def count(version, request):
        total, revision = 0, None
        while True:
            response = client.get_transaction_history(transaction_id, revision, request, version)
            total += len(response.signedTransactions)
            revision = response.revision
            if not response.hasMore:
                return total
    call(results, "historyV1", lambda: count(GetTransactionHistoryVersion.V1, TransactionHistoryRequest()))
    # Python prints booleans capitalised: revoked=True / revoked=False in the query string.
    call(results, "historyRevoked", lambda: count(GetTransactionHistoryVersion.V2, TransactionHistoryRequest(revoked=True)))
    call(results, "historyNotRevoked", lambda: count(GetTransactionHistoryVersion.V2, TransactionHistoryRequest(revoked=False)))
    call(results, "setTokenOnRenewal", lambda: client.set_app_account_token(renewal_id, UpdateAppAccountTokenRequest(appAccountToken=str(uuid.uuid4()))) or "ok")
    call(results, "setTokenOnFamilyCopy", lambda: client.set_app_account_token(family_copy_id, UpdateAppAccountTokenRequest(appAccountToken=str(uuid.uuid4()))) or "ok")
    call(results, "extendFamilyCopy", lambda: client.extend_subscription_renewal_date(family_copy_id, ExtendRenewalDateRequest(
        extendByDays=3, extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=str(uuid.uuid4()))).success)

    def app_transaction():
        first = client.get_app_transaction_info(transaction_id).signedAppTransactionInfo
        middle = first.split(".")[1]
        app_transaction_id = json.loads(base64.urlsafe_b64decode(middle + "=" * (-len(middle) % 4)))["appTransactionId"]
        again = client.get_app_transaction_info(app_transaction_id).signedAppTransactionInfo
        return {"signed": first, "byAppTransactionId": again}
    call(results, "appTransaction", app_transaction)
    call(results, "missingAppTransaction", lambda: client.get_app_transaction_info("9999999999999999"))

    def consumption(transaction, consented=True, percentage=25000):
        return lambda: client.send_consumption_information(transaction, ConsumptionRequest(
            customerConsented=consented, sampleContentProvided=False, deliveryStatus=DeliveryStatus.DELIVERED,
            consumptionPercentage=percentage, refundPreference=RefundPreference.GRANT_PRORATED)) or "ok"
    call(results, "consumption", consumption(consumable_id))
    call(results, "consumptionWithoutConsent", consumption(consumable_id, consented=False))
    call(results, "consumptionPercentageOfSubscription", consumption(renewal_id))
    call(results, "consumptionOfFamilyCopy", consumption(family_copy_id, percentage=None))

    def consumption_of_app_transaction():
        first = client.get_app_transaction_info(transaction_id).signedAppTransactionInfo
        middle = first.split(".")[1]
        app_transaction_id = json.loads(base64.urlsafe_b64decode(middle + "=" * (-len(middle) % 4)))["appTransactionId"]
        return consumption(app_transaction_id, percentage=None)()
    call(results, "consumptionOfAppTransaction", consumption_of_app_transaction)
    call(results, "finish", lambda: client.finish_transaction(consumable_id) or "ok")
    call(results, "missingFinish", lambda: client.finish_transaction("9999999999999999") or "ok")
    call(results, "historyV1AfterFinish", lambda: count(GetTransactionHistoryVersion.V1, TransactionHistoryRequest()))

    def mass_extend():
        request_id = str(uuid.uuid4())
        answered = client.extend_renewal_date_for_all_active_subscribers(MassExtendRenewalDateRequest(
            extendByDays=1, extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=request_id, productId=product_id))
        status = client.get_status_of_subscription_renewal_date_extensions(request_id, product_id)
        return {"requestIdentifier": answered.requestIdentifier == request_id, "complete": status.complete,
                "succeeded": status.succeededCount, "failed": status.failedCount, "completeDate": status.completeDate is not None}
    call(results, "massExtend", mass_extend)
    call(results, "missingMassExtendStatus", lambda: client.get_status_of_subscription_renewal_date_extensions(str(uuid.uuid4()), product_id))
    call(results, "badMassExtend", lambda: client.extend_renewal_date_for_all_active_subscribers(MassExtendRenewalDateRequest(
        extendByDays=1, extendReasonCode=ExtendReasonCode.CUSTOMER_SATISFACTION, requestIdentifier=str(uuid.uuid4()), productId="no.such.product")))


if __name__ == "__main__":
    main()
