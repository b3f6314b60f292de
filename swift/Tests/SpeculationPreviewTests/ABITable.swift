import Foundation

/// tests/abi_cases.py as its `table_json` exports it (see there for the
/// encoding): the one table of C-ABI cases the C host, the ctypes host and
/// these tests run.
struct ABITable: Decodable {
    struct OriginalModule: Decodable {
        let dflashNote: String
        let sampledReason: String
        let refusalPrefix: String
        let visionBlocker: String
        let utf8Blocker: String
    }

    /// The engine around the original module (tests/engine_texts.py): its name, its
    /// version, and its MTP runner's text for an install without a head.
    struct Engine: Decodable {
        let engine: String
        let engineVersion: String
        let noHead: String
    }

    /// A byte-string argument as the table gives it.
    enum Argument: Decodable, Equatable {
        /// A NULL pointer.
        case null
        /// UTF-8 text without a NUL: what a Swift String can carry.
        case text(String)
        /// Anything else (not UTF-8), as hex: no Swift String carries it.
        case hex(String)

        private enum Keys: String, CodingKey { case null, text, hex }

        init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: Keys.self)
            if let text = try container.decodeIfPresent(String.self, forKey: .text) {
                self = .text(text)
            } else if let hex = try container.decodeIfPresent(String.self, forKey: .hex) {
                self = .hex(hex)
            } else if try container.decode(Bool.self, forKey: .null) {
                self = .null
            } else {
                throw DecodingError.dataCorruptedError(forKey: .null, in: container,
                                                       debugDescription: "an argument with no value")
            }
        }
    }

    struct Chain: Decodable {
        let install: String
        let options: Argument
    }

    struct Case: Decodable {
        let id: String
        let fn: String
        let status: String
        let install: String?
        let modelDir: Argument?
        let options: Argument
        let choice: Argument?
        let chain: Chain?
        let reads: String?
        let nullOut: Bool
        let json: Expected?
        let message: Expected?
    }

    let originalModule: OriginalModule
    let engine: Engine
    /// Header macro name -> value, as the project's one reader of the header
    /// (turbospark_ffi.native.header_constants) reads it.
    let statuses: [String: Int32]
    let installs: [String]
    let cases: [Case]
}

/// An expected value of the table: a JSON value exactly, a string holding
/// some parts, or an object holding at least some keys.
indirect enum Expected: Decodable {
    case value(JSONValue)
    case has([String])
    case subset([String: Expected])
    case object([String: Expected])
    case array([Expected])

    private enum Keys: String, CodingKey { case value, has, subset, object, array }

    init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        if container.contains(.value) {
            self = .value(try container.decode(JSONValue.self, forKey: .value))
        } else if let parts = try container.decodeIfPresent([String].self, forKey: .has) {
            self = .has(parts)
        } else if let items = try container.decodeIfPresent([String: Expected].self, forKey: .subset) {
            self = .subset(items)
        } else if let items = try container.decodeIfPresent([String: Expected].self, forKey: .object) {
            self = .object(items)
        } else {
            self = .array(try container.decode([Expected].self, forKey: .array))
        }
    }

    /// Every mismatch between this and `actual`, as tests/abi_cases.py's
    /// `match` words them ("$.key: ...").
    func mismatches(_ actual: JSONValue, at path: String = "$") -> [String] {
        switch self {
        case .value(let value):
            return value == actual ? [] : ["\(path): expected \(value), got \(actual)"]
        case .has(let parts):
            guard case .string(let text) = actual else {
                return ["\(path): expected a string containing \(parts), got \(actual)"]
            }
            return parts.filter { !text.contains($0) }.map { "\(path): \(text.debugDescription) lacks \($0.debugDescription)" }
        case .subset(let items), .object(let items):
            guard case .object(let object) = actual else {
                return ["\(path): expected an object, got \(actual)"]
            }
            var out: [String] = []
            if case .object = self, Set(object.keys) != Set(items.keys) {
                out.append("\(path): keys \(object.keys.sorted()) != expected \(items.keys.sorted())")
            }
            for (key, expected) in items.sorted(by: { $0.key < $1.key }) {
                if let value = object[key] {
                    out += expected.mismatches(value, at: "\(path).\(key)")
                } else if case .subset = self {
                    out.append("\(path): missing key \(key)")
                }
            }
            return out
        case .array(let items):
            guard case .array(let values) = actual, values.count == items.count else {
                return ["\(path): expected \(items.count) items, got \(actual)"]
            }
            return zip(items, values).enumerated().flatMap { index, pair in
                pair.0.mismatches(pair.1, at: "\(path)[\(index)]")
            }
        }
    }
}

/// A JSON value, telling a boolean from a number, as the table's exact
/// comparisons do. An integral number written with a fraction (2.0) reads as
/// the integer: JSONDecoder does not keep that difference, which the C and
/// ctypes hosts of the same table check.
enum JSONValue: Decodable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .int(let value): "\(value)"
        case .double(let value): "\(value) (a fraction)"
        case .string(let value): value.debugDescription
        case .array(let values): "[\(values.map(\.description).joined(separator: ", "))]"
        case .object(let items):
            "{\(items.sorted { $0.key < $1.key }.map { "\($0.key.debugDescription): \($0.value)" }.joined(separator: ", "))}"
        }
    }
}
