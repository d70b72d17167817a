#!/usr/bin/env python3
"""Drive the 14 Retention Messaging calls of Apple's App Store Server API client (PyPI app-store-server-library)
against a base URL, with the errors Apple documents around them.

Usage: apple_library_retention.py BASE_URL KEY_PEM KEY_ID ISSUER_ID BUNDLE_ID ORIGINAL_TRANSACTION_ID PRODUCT_ID
                                  REALTIME_URL TEXT_MESSAGE_ID
TEXT_MESSAGE_ID is the message the endpoint at REALTIME_URL answers with; the script uploads it.
Prints one JSON object: what each call returned (or the APIException it raised).
"""
import json
import struct
import sys
import time
import uuid
import zlib

from appstoreserverlibrary.api_client import APIException, AppStoreServerAPIClient
from appstoreserverlibrary.models.BulletPoint import BulletPoint
from appstoreserverlibrary.models.DefaultConfigurationRequest import DefaultConfigurationRequest
from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.models.HeaderPosition import HeaderPosition
from appstoreserverlibrary.models.ImageSize import ImageSize
from appstoreserverlibrary.models.PerformanceTestRequest import PerformanceTestRequest
from appstoreserverlibrary.models.RealtimeUrlRequest import RealtimeUrlRequest
from appstoreserverlibrary.models.UploadMessageImage import UploadMessageImage
from appstoreserverlibrary.models.UploadMessageRequestBody import UploadMessageRequestBody


def png(width, height, alpha=False):
    """A real PNG: black, RGB (or RGBA), zlib-compressed rows."""
    channels = 4 if alpha else 3
    raw = (b"\x00" + b"\x00" * (width * channels)) * height

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 6 if alpha else 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")


def call(results, name, function):
    try:
        value = function()
        results[name] = "ok" if value is None else value
    except APIException as error:
        results[name] = {"httpStatus": error.http_status_code, "apiError": error.raw_api_error, "message": error.error_message}
    except Exception as error:  # anything else is a parse failure on Apple's side: the simulator's bug
        results[name] = {"exception": repr(error)}


def main():
    base, key_path, key_id, issuer, bundle, original_id, product_id, realtime_url, text_message = sys.argv[1:10]
    with open(key_path, "rb") as f:
        key = f.read()
    client = AppStoreServerAPIClient(key, key_id, issuer, bundle, Environment.SANDBOX)
    client._base_url = base
    r = {}
    full, bullet, message, text = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.UUID(text_message)

    call(r, "uploadImage", lambda: client.upload_image(full, png(3840, 400)))
    call(r, "uploadImageAgain", lambda: client.upload_image(full, png(3840, 400)))
    call(r, "uploadImageNotPNG", lambda: client.upload_image(uuid.uuid4(), b"GIF89a not a png"))
    call(r, "uploadImageTransparent", lambda: client.upload_image(uuid.uuid4(), png(3840, 400, alpha=True)))
    call(r, "uploadImageWrongSize", lambda: client.upload_image(uuid.uuid4(), png(1000, 400)))
    call(r, "uploadBulletImage", lambda: client.upload_image(bullet, png(1024, 1024), ImageSize.BULLET_POINT))
    call(r, "imageList", lambda: [{"id": str(i.imageIdentifier), "state": i.rawImageState, "size": i.rawImageSize}
                                  for i in client.get_image_list().imageIdentifiers])

    body = UploadMessageRequestBody(header="Before you go", body="Your plan keeps your projects in sync.",
                                    image=UploadMessageImage(imageIdentifier=full, altText="A synced project"),
                                    headerPosition=HeaderPosition.ABOVE_IMAGE,
                                    bulletPoints=[BulletPoint(text="Sync on every device", imageIdentifier=bullet, altText="Sync")])
    call(r, "uploadMessage", lambda: client.upload_message(message, body))
    call(r, "uploadMessageAgain", lambda: client.upload_message(message, body))
    call(r, "uploadTextMessage", lambda: client.upload_message(text, UploadMessageRequestBody(header="Stay a while", body="Keep your plan.")))
    call(r, "uploadMessageAboveMissingImage", lambda: client.upload_message(uuid.uuid4(), UploadMessageRequestBody(
        header="Header", body="Body", headerPosition=HeaderPosition.ABOVE_IMAGE)))
    call(r, "messageList", lambda: sorted([{"id": str(m.messageIdentifier), "state": m.rawMessageState}
                                           for m in client.get_message_list().messageIdentifiers], key=lambda m: m["id"]))

    call(r, "configureDefault", lambda: client.configure_default_message(product_id, "en-US", DefaultConfigurationRequest(messageIdentifier=message)))
    call(r, "getDefault", lambda: str(client.get_default_message(product_id, "en-US").messageIdentifier))
    call(r, "configureDefaultBadLocale", lambda: client.configure_default_message(product_id, "en_us", DefaultConfigurationRequest(messageIdentifier=message)))
    call(r, "configureDefaultUnknownMessage", lambda: client.configure_default_message(product_id, "en-US", DefaultConfigurationRequest(messageIdentifier=uuid.uuid4())))
    call(r, "configureDefaultUnknownProduct", lambda: client.configure_default_message("no.such.product", "en-US", DefaultConfigurationRequest(messageIdentifier=message)))
    call(r, "getDefaultUnset", lambda: client.get_default_message(product_id, "fr-FR"))
    call(r, "deleteImageInUse", lambda: client.delete_image(full))
    call(r, "deleteImageUnknown", lambda: client.delete_image(uuid.uuid4()))

    call(r, "configureRealtimeURLBad", lambda: client.configure_realtime_url(RealtimeUrlRequest(realtimeURL="ftp://example.com/retention")))
    call(r, "getRealtimeURLUnset", lambda: client.get_realtime_url())
    call(r, "configureRealtimeURL", lambda: client.configure_realtime_url(RealtimeUrlRequest(realtimeURL=realtime_url)))
    call(r, "getRealtimeURL", lambda: client.get_realtime_url().realtimeURL)

    started = {}

    def initiate():
        response = client.initiate_performance_test(PerformanceTestRequest(originalTransactionId=original_id))
        started["id"] = response.requestId
        c = response.config
        return {"requestId": response.requestId is not None, "threshold": c.responseTimeThreshold, "total": c.totalRequests,
                "concurrent": c.maxConcurrentRequests, "successRateThreshold": c.successRateThreshold, "duration": c.totalDuration}
    call(r, "initiatePerformanceTest", initiate)
    call(r, "initiatePerformanceTestAgain", lambda: client.initiate_performance_test(PerformanceTestRequest(originalTransactionId=original_id)))

    def results():
        deadline = time.time() + 60
        while True:
            result = client.get_performance_test_results(started["id"])
            if result.rawResult != "PENDING" or time.time() > deadline:
                t = result.responseTimes
                return {"result": result.rawResult, "successRate": result.successRate, "numPending": result.numPending, "target": result.target,
                        "p50": t.p50, "p99": t.p99, "average": t.average, "failures": result.rawFailures}
            time.sleep(0.2)
    call(r, "performanceTestResults", results)
    call(r, "performanceTestResultsUnknown", lambda: client.get_performance_test_results(str(uuid.uuid4())))
    call(r, "performanceTestResultsInvalid", lambda: client.get_performance_test_results("not-a-request-id"))

    call(r, "deleteDefault", lambda: client.delete_default_message(product_id, "en-US"))
    call(r, "deleteDefaultAgain", lambda: client.delete_default_message(product_id, "en-US"))
    call(r, "getDefaultDeleted", lambda: client.get_default_message(product_id, "en-US"))
    call(r, "deleteMessage", lambda: client.delete_message(message))
    call(r, "deleteMessageAgain", lambda: client.delete_message(message))
    call(r, "deleteImage", lambda: client.delete_image(full))
    call(r, "deleteRealtimeURL", lambda: client.delete_realtime_url())
    call(r, "getRealtimeURLDeleted", lambda: client.get_realtime_url())
    print(json.dumps(r, sort_keys=True, default=str))


if __name__ == "__main__":
    main()
