import Foundation
import Testing
import SpeculationPreview

/// The shared ABI case table (tests/abi_cases.py), run through this package's
/// raw-JSON calls: every case Swift can express, against the installs the
/// table's own materialize() writes.
@Suite struct ABITableTests {
    /// Why a case cannot be made from Swift, or nil when it can: the Swift
    /// API takes a String (never NULL, never bytes that are not UTF-8) for
    /// every non-optional argument, and always passes an out-parameter.
    static func inexpressible(_ c: ABITable.Case) -> String? {
        if c.nullOut { return "a NULL out_json" }
        for argument in [c.modelDir, c.choice, c.chain?.options, c.options] {
            if case .hex = argument { return "bytes that are not UTF-8" }
        }
        if c.modelDir == .null { return "a NULL model_dir" }
        if c.fn == "draft_policies", c.chain == nil, c.choice == .null { return "a NULL choice_json" }
        return nil
    }

    static func optional(_ argument: ABITable.Argument?) -> String? {
        if case .text(let text) = argument { return text }
        return nil
    }

    /// The Swift function a case's C function is called through, and its
    /// name in a thrown error.
    static func call(_ c: ABITable.Case, _ dirs: [String: String]) -> (Result<String, TsffiError>, String) {
        let dir = optional(c.modelDir) ?? c.install.map { dirs[$0]! } ?? ""
        let options = optional(c.options)
        func run(_ body: () throws(TsffiError) -> String) -> Result<String, TsffiError> {
            do throws(TsffiError) { return .success(try body()) } catch { return .failure(error) }
        }
        switch c.fn {
        case "build_info":
            return (run { () throws(TsffiError) in try Tsffi.buildInfoJSON() }, "tsffi_build_info_json")
        case "install_info":
            return (run { () throws(TsffiError) in try Tsffi.installInfoJSON(modelDir: dir) },
                    "tsffi_install_info_json")
        case "resolve_speculation":
            return (run { () throws(TsffiError) in try Tsffi.resolveSpeculationJSON(optionsJSON: options) },
                    "tsffi_resolve_speculation")
        case "resolve_drafter":
            return (run { () throws(TsffiError) in
                try Tsffi.resolveDrafterJSON(modelDir: dir, optionsJSON: options)
            }, "tsffi_resolve_drafter")
        case "speculation_plan":
            return (run { () throws(TsffiError) in
                try Tsffi.speculationPlanJSON(modelDir: dir, optionsJSON: options)
            }, "tsffi_speculation_plan")
        case "speculation_choices":
            return (run { () throws(TsffiError) in
                try Tsffi.speculationChoicesJSON(modelDir: dir, optionsJSON: options)
            }, "tsffi_speculation_choices")
        case "draft_policies":
            return (run { () throws(TsffiError) in
                // A chain feeds exactly what tsffi_resolve_drafter returned.
                let choice = try c.chain.map { (chain) throws(TsffiError) in
                    try Tsffi.resolveDrafterJSON(modelDir: dirs[chain.install]!,
                                                      optionsJSON: optional(chain.options))
                } ?? optional(c.choice)!
                return try Tsffi.draftPoliciesJSON(choiceJSON: choice, optionsJSON: options)
            }, "tsffi_draft_policies")
        default:
            fatalError("the table names a function this test does not know: \(c.fn)")
        }
    }

    /// The typed result a successful answer must also decode as.
    static func decodes(_ fn: String, _ json: String) throws {
        let data = Data(json.utf8)
        let decoder = JSONDecoder()
        switch fn {
        case "build_info": _ = try decoder.decode(BuildInfo.self, from: data)
        case "install_info": _ = try decoder.decode(InstallInfo.self, from: data)
        case "resolve_speculation": _ = try decoder.decode(SpeculationPlan.self, from: data)
        case "resolve_drafter": _ = try decoder.decode(DrafterChoice.self, from: data)
        case "draft_policies": _ = try decoder.decode(DraftPolicies.self, from: data)
        case "speculation_plan": _ = try decoder.decode(PlanResult.self, from: data)
        default: _ = try decoder.decode(SpeculationChoices.self, from: data)
        }
    }

    @Test func everyCaseSwiftCanExpressGivesTheTablesAnswer() throws {
        let table = Fixtures.table
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("turbospark-table-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        // The installs as the table writes them, checked by the Python
        // reader before any case is believed (materialize, verify_installs).
        let tests = URL(fileURLWithPath: Fixtures.repoRoot).appendingPathComponent("tests").path
        try Fixtures.runPython("""
            import sys; sys.path.insert(0, \(JSONString(tests)))
            from pathlib import Path
            from abi_cases import materialize, verify_installs
            verify_installs(materialize(Path(\(JSONString(root.path)))))
            """)
        let dirs = Dictionary(uniqueKeysWithValues: table.installs.map { ($0, root.appendingPathComponent($0).path) })

        var ran: [String: Int] = [:]
        for c in table.cases {
            if let why = Self.inexpressible(c) {
                // Only the C-level shapes no Swift call can produce are left out.
                #expect(["a NULL out_json", "bytes that are not UTF-8", "a NULL model_dir",
                         "a NULL choice_json"].contains(why))
                continue
            }
            ran[c.fn, default: 0] += 1
            let want = TsffiStatus(rawValue: try #require(table.statuses[c.status], "\(c.id)"))
            let (outcome, function) = Self.call(c, dirs)
            switch outcome {
            case .success(let text):
                #expect(want == .ok, "\(c.id): succeeded, expected \(c.status)")
                guard want == .ok else { continue }
                var value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
                if ["resolve_drafter", "speculation_plan", "install_info"].contains(c.fn),
                   case .object(var object) = value
                {
                    // Each names the directory it read: exactly that install's.
                    let read = object.removeValue(forKey: "modelDir")
                    #expect(read == .string(dirs[c.reads ?? c.install!]!), "\(c.id): modelDir \(String(describing: read))")
                    value = .object(object)
                }
                if let expected = c.json {
                    let problems = expected.mismatches(value)
                    #expect(problems.isEmpty, "\(c.id):\n  \(problems.joined(separator: "\n  "))")
                }
                #expect(throws: Never.self, "\(c.id): the typed result does not decode") {
                    try Self.decodes(c.fn, text)
                }
            case .failure(let error):
                #expect(error.status == want, "\(c.id): \(error)")
                #expect(error.function == function, "\(c.id)")
                if let expected = c.message {
                    let problems = expected.mismatches(.string(error.message), at: "last error")
                    #expect(problems.isEmpty, "\(c.id):\n  \(problems.joined(separator: "\n  "))")
                }
            }
        }
        // Every function of the table ran, and every plan case but the two
        // that pass a NULL or non-UTF-8 model_dir and the NULL out_json one.
        #expect(Set(ran.keys) == Set(table.cases.map(\.fn)))
        let planCases = table.cases.filter { $0.fn == "speculation_plan" }
        #expect(ran["speculation_plan"] == planCases.count - 3)
    }
}

/// `text` as a Python (and JSON) string literal. Slashes unescaped: Python
/// would keep the backslash of a JSON "\/".
private func JSONString(_ text: String) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .withoutEscapingSlashes
    return String(decoding: try! encoder.encode(text), as: UTF8.self)
}
