import Foundation
import PurchaseAPI
import Testing

/// What a newer server may add must not make this SDK's reading fail: a 200 it cannot read is retried for ever and
/// never finished.
@Suite("Answers of a newer server: values this version does not know are kept or read safely, never a failed decode")
struct ForwardCompatibilityTests {
    @Test("A purchase answer with an outcome, a refusal class, an entitlement state and an error code this version does not know still decodes")
    func unknownValues() throws {
        let json = #"""
        {"outcome": "grantedLater", "transactionId": "1", "transactions": [{"transactionId": "1", "outcome": "grantedLater"}],
         "refused": [{"transactionId": "2", "code": "brand_new_code", "message": "m", "class": "someNewClass"}],
         "entitlements": {"accountId": "ada", "balances": {}, "entitlements": [
            {"name": "pro", "productId": "p", "transactionId": "1", "state": "paused", "environment": "Production", "newField": 1}]},
         "newTopLevelField": {"x": 1}}
        """#
        let reply = try APIJSON.decoder().decode(PurchaseReply.self, from: Data(json.utf8))
        #expect(reply.outcome?.rawValue == "grantedLater")
        #expect(reply.outcome != .deliveredToOwner, "an unknown outcome is not taken for delivery to another account")
        // Unknown class: the operator's, so the device keeps the paid transaction rather than finishing it.
        #expect(reply.refused.first?.class == .operator)
        #expect(reply.refused.first?.code.rawValue == "brand_new_code")
        #expect(reply.entitlements.entitlements.first?.state.rawValue == "paused")
    }

    @Test("An error body with an unknown class falls back to the code's class by status; an offer answer of an unknown kind still gives its signature")
    func unknownErrorClassAndOfferKind() throws {
        let error = try APIJSON.decoder().decode(ErrorBody.self, from: Data(#"{"error": {"code": "storage", "message": "m", "class": "newClass"}}"#.utf8))
        #expect(error.error.class == nil)
        #expect(RefusalClass.of(code: error.error.code, status: 503) == .retry)
        let offer = try APIJSON.decoder().decode(OfferSignReply.self, from: Data(#"{"kind": "winBackOffer", "productId": "p", "signature": "jws"}"#.utf8))
        #expect(offer.kind == nil && offer.signature == "jws")
    }
}
