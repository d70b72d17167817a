#!/usr/bin/env python3
"""Sign Advanced Commerce API in-app requests with Apple's official App Store Server Library (PyPI
app-store-server-library, AdvancedCommerceAPIInAppSignatureCreator and its request models).

Usage: apple_library_advanced_commerce.py KEY_PEM KEY_ID ISSUER_ID BUNDLE_ID APP_ACCOUNT_TOKEN OTHER_KEY_PEM
Prints one JSON object: a CREATE_SUBSCRIPTION request (two items, one with a three-period offer), a
CREATE_ONE_TIME_CHARGE request, the subscription signed with another key, and the request reference ids used. Used by
the tests: what Apple's own creator signs, the simulator must sell as it says (and refuse when signed by another key).
"""
import json
import sys
import uuid

from appstoreserverlibrary.jws_signature_creator import AdvancedCommerceAPIInAppSignatureCreator
from appstoreserverlibrary.models.AdvancedCommerceDescriptors import AdvancedCommerceDescriptors
from appstoreserverlibrary.models.AdvancedCommerceOffer import AdvancedCommerceOffer
from appstoreserverlibrary.models.AdvancedCommerceOfferPeriod import AdvancedCommerceOfferPeriod
from appstoreserverlibrary.models.AdvancedCommerceOfferReason import AdvancedCommerceOfferReason
from appstoreserverlibrary.models.AdvancedCommerceOneTimeChargeCreateRequest import AdvancedCommerceOneTimeChargeCreateRequest
from appstoreserverlibrary.models.AdvancedCommerceOneTimeChargeItem import AdvancedCommerceOneTimeChargeItem
from appstoreserverlibrary.models.AdvancedCommercePeriod import AdvancedCommercePeriod
from appstoreserverlibrary.models.AdvancedCommerceRequestInfo import AdvancedCommerceRequestInfo
from appstoreserverlibrary.models.AdvancedCommerceSubscriptionCreateItem import AdvancedCommerceSubscriptionCreateItem
from appstoreserverlibrary.models.AdvancedCommerceSubscriptionCreateRequest import AdvancedCommerceSubscriptionCreateRequest


def main():
    key_path, key_id, issuer, bundle, token, other_key_path = sys.argv[1:7]
    with open(key_path, "rb") as f:
        key = f.read()
    with open(other_key_path, "rb") as f:
        other_key = f.read()
    creator = AdvancedCommerceAPIInAppSignatureCreator(key, key_id, issuer, bundle)
    subscription_id, one_time_id = uuid.uuid4(), uuid.uuid4()
    subscription = AdvancedCommerceSubscriptionCreateRequest(
        currency="USD",
        descriptors=AdvancedCommerceDescriptors(description="News, sports and more", displayName="News+"),
        items=[
            AdvancedCommerceSubscriptionCreateItem(SKU="news.basic", description="Every article", displayName="News", price=9990),
            AdvancedCommerceSubscriptionCreateItem(
                SKU="news.sports", description="Live scores", displayName="Sports", price=3990,
                offer=AdvancedCommerceOffer(periodCount=3, price=2990, period=AdvancedCommerceOfferPeriod.P1M,
                                            reason=AdvancedCommerceOfferReason.ACQUISITION)),
        ],
        taxCode="C003-00-2",
        period=AdvancedCommercePeriod.P1M,
        requestInfo=AdvancedCommerceRequestInfo(requestReferenceId=subscription_id, appAccountToken=uuid.UUID(token)),
    )
    one_time = AdvancedCommerceOneTimeChargeCreateRequest(
        currency="USD",
        item=AdvancedCommerceOneTimeChargeItem(SKU="article.42", description="One long read", displayName="Article 42", price=1990),
        taxCode="C003-00-2",
        requestInfo=AdvancedCommerceRequestInfo(requestReferenceId=one_time_id),
    )
    print(json.dumps({
        "subscription": creator.create_signature(subscription),
        "oneTime": creator.create_signature(one_time),
        "otherKey": AdvancedCommerceAPIInAppSignatureCreator(other_key, key_id, issuer, bundle).create_signature(subscription),
        "subscriptionRequestReferenceId": str(subscription_id),
        "oneTimeRequestReferenceId": str(one_time_id),
    }, sort_keys=True))


if __name__ == "__main__":
    main()
