#!/usr/bin/env python3
"""Make offer signatures with Apple's official App Store Server Library (PyPI app-store-server-library).

Usage: apple_library_offers.py KEY_PEM KEY_ID ISSUER_ID BUNDLE_ID PRODUCT_ID OFFER_ID TRANSACTION_ID APP_ACCOUNT_TOKEN OTHER_KEY_PEM
Prints one JSON object: promotional offer JWS (PromotionalOfferV2SignatureCreator), introductory-offer eligibility JWS
(IntroductoryOfferEligibilitySignatureCreator, allowed and not), the original promotional-offer signature
(PromotionalOfferSignatureCreator, fresh and 25 hours old) and a promotional JWS made with another key. Used by the
StoreSimulator tests: what Apple's own creators make, the simulator must take (and refuse when tampered with).
"""
import json
import sys
import time
import uuid

from appstoreserverlibrary.jws_signature_creator import IntroductoryOfferEligibilitySignatureCreator, PromotionalOfferV2SignatureCreator
from appstoreserverlibrary.promotional_offer import PromotionalOfferSignatureCreator


def main():
    key_path, key_id, issuer, bundle, product, offer, transaction_id, token, other_key_path = sys.argv[1:10]
    with open(key_path, "rb") as f:
        key = f.read()
    with open(other_key_path, "rb") as f:
        other_key = f.read()
    promotional = PromotionalOfferV2SignatureCreator(key, key_id, issuer, bundle)
    eligibility = IntroductoryOfferEligibilitySignatureCreator(key, key_id, issuer, bundle)
    legacy = PromotionalOfferSignatureCreator(key, key_id, bundle)

    def original(age_ms):
        nonce = uuid.uuid4()
        timestamp = int(time.time() * 1000) - age_ms
        return {"keyIdentifier": key_id, "nonce": str(nonce), "timestamp": timestamp,
                "signature": legacy.create_signature(product, offer, token, nonce, timestamp)}

    print(json.dumps({
        "promotional": promotional.create_signature(product, offer, transaction_id),
        "promotionalWithoutTransaction": promotional.create_signature(product, offer, None),
        "promotionalOtherKey": PromotionalOfferV2SignatureCreator(other_key, key_id, issuer, bundle).create_signature(product, offer, transaction_id),
        "introAllowed": eligibility.create_signature(product, True, transaction_id),
        "introDenied": eligibility.create_signature(product, False, transaction_id),
        "legacy": original(0),
        "legacyExpired": original(25 * 3600 * 1000),
    }, sort_keys=True))


if __name__ == "__main__":
    main()
