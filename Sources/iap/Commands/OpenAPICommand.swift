import ArgumentParser
import Foundation
import PurchaseAPIDocument

/// `iap openapi`: the server's OpenAPI document, generated from the contract's types. The repository keeps it as the
/// resource the server serves; a test fails when the two differ.
struct OpenAPICommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "openapi",
        abstract: "Print the purchase server's OpenAPI 3.1 document, generated from the PurchaseAPI module's types.",
        discussion: "After changing an endpoint or a body: iap openapi --output Sources/PurchaseServer/Resources/openapi.json (docs/API.md).")

    @Option(help: "Write the document to this file instead of standard output.")
    var output: String?

    func run() throws {
        let json = try OpenAPIDocument().json
        if let output {
            try json.write(to: URL(fileURLWithPath: output), options: .atomic)
        } else {
            FileHandle.standardOutput.write(json)
        }
    }
}
