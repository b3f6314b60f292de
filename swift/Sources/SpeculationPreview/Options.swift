import Foundation

/// Which drafter speculation drives (the option key `speculativeDrafter`).
///
/// In ``Options`` it is the request: `.auto` (whichever the install carries,
/// read off its resident index), `.mtp` (the checkpoint's own head, a token at
/// a time) or `.dflash` (the DFlash2 block drafter, opt-in). In results it is
/// what was resolved, `.mtp` or `.dflash`.
public enum SpeculativeDrafter: String, Codable, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case auto
    case mtp
    case dflash

    /// The drafter an engine spelling names: `"auto"`, `"mtp"` or `"dflash"`,
    /// exactly (case-sensitive), as the engine's open reads
    /// `speculativeDrafter` (docs/ENGINE.md section 5); nil for any other
    /// text. For an app's own raw values, e.g. `SpeculativeDrafter(app.drafter.rawValue)`.
    /// Nil says only "not a spelling": the library's refusal of the same
    /// text, sent as JSON, is the message to show.
    public init?(_ spelling: String) {
        self.init(rawValue: spelling)
    }

    /// The engine's spelling (`"mtp"`).
    public var description: String { rawValue }
}

/// Whether and how far a run drafts ahead (the option key `speculation`).
///
/// `.auto`: draft if the install can, and say why not when it cannot. `.off`:
/// never. `.block(n)`: draft `n` tokens per round, or fail naming the reason
/// (a ``TsffiError`` with status ``TsffiStatus/refused``). A block
/// outside 1...15 (0 included) is an invalid option, as the engine's parser
/// says: the library refuses it with ``TsffiStatus/invalidArgument``,
/// naming the range, before it reads any install. Any `Int` is passed through
/// as it is, so that message is the library's.
public enum Speculation: Sendable, Hashable, Codable, CustomStringConvertible {
    case auto
    case off
    case block(Int)

    /// The blocks the engine's open accepts: block B verifies B+1 rows and
    /// the batched verify's cap is 16 (docs/ENGINE.md section 3).
    public static let allowedBlocks: ClosedRange<Int> = 1...15

    /// The value an engine spelling names, exactly as the engine's open reads
    /// a `speculation` string (docs/ENGINE.md section 5): `"auto"` or
    /// `"off"` in any ASCII case, or a block in 1...15 as ASCII decimal
    /// digits (leading zeros allowed: `"02"` is block 2); nil for any other
    /// text (`"0"`, `"16"`, `" 2"`, `"+2"`, `"2.0"`, `""`, non-ASCII digits
    /// or letters). For an app's own raw values, e.g.
    /// `Speculation(app.speculationMode.rawValue)`. Nil says only "not a
    /// spelling": the library's refusal of the same text, sent as JSON, is
    /// the message to show.
    public init?(_ spelling: String) {
        let bytes = Array(spelling.utf8)
        // ASCII only, before any case folding: Unicode lowercasing maps some
        // non-ASCII letters onto ASCII ones, which the engine does not.
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 < 0x80 }) else {
            return nil
        }
        let folded = String(decoding: bytes.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
        if folded == "auto" {
            self = .auto
        } else if folded == "off" {
            self = .off
        } else if bytes.allSatisfy({ (0x30...0x39).contains($0) }) {
            // Leading zeros dropped first, so a long run of them is still a
            // small number and nothing overflows.
            let digits = bytes.drop { $0 == 0x30 }
            guard digits.count <= 2,
                  let block = Int(String(decoding: digits, as: UTF8.self)),
                  Self.allowedBlocks.contains(block)
            else {
                return nil
            }
            self = .block(block)
        } else {
            return nil
        }
    }

    /// The engine's spelling: `"auto"`, `"off"`, or the block in decimal
    /// (`"2"`). What ``init(_:)`` reads back for every value it can make.
    public var description: String {
        switch self {
        case .auto: "auto"
        case .off: "off"
        case .block(let n): String(n)
        }
    }

    /// `"auto"`, `"off"`, or the block as a JSON integer: the engine's keys.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .auto: try container.encode("auto")
        case .off: try container.encode("off")
        case .block(let n): try container.encode(n)
        }
    }

    /// Reads what the engine accepts: `"auto"` / `"off"` (any case), a block
    /// as an integer or a string of ASCII digits, or null (= auto).
    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .auto
        } else if let n = try? container.decode(Int.self) {
            self = .block(n)
        } else {
            let text = try container.decode(String.self)
            switch text.lowercased() {
            case "auto": self = .auto
            case "off": self = .off
            default:
                if !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                   let n = Int(text) {
                    self = .block(n)
                } else {
                    throw DecodingError.dataCorruptedError(
                        in: container,
                        debugDescription: "speculation: got \(text); accepts \"auto\", \"off\", "
                            + "null, or a block as an integer or a string of ASCII digits")
                }
            }
        }
    }
}

/// The engine's own speculation blocker, as the host learned it after open
/// (the option key `engineBlocker`). Three states, because the library
/// distinguishes them:
///
/// - `.absent`: the key is not sent; ``Tsffi/speculationPlan(modelDir:options:)``
///   previews the blocker from the install's files.
/// - `.none`: sent as `null`: the engine reported no blocker.
/// - `.reason(text)`: the engine's reason, sent verbatim.
public enum EngineBlocker: Sendable, Hashable {
    case absent
    case none
    case reason(String)
}

/// The options a host gives the engine's open, as a Swift value. ``json()``
/// produces the JSON object with the engine's camelCase keys, which is what
/// every call of this package sends.
///
/// Nothing is validated here: a block outside 1...15, a negative or
/// non-finite temperature, an empty blocker reason are all sent as they are,
/// and the library refuses them with its own message. (A non-finite
/// temperature is sent as the string `"nan"` / `"inf"` / `"-inf"`, which JSON
/// can carry and the library refuses, naming the value.)
public struct Options: Sendable, Hashable, Encodable {
    /// `speculativeDrafter`. Default `.auto`.
    public var drafter: SpeculativeDrafter
    /// `speculation`. Default `.auto`.
    public var speculation: Speculation
    /// `temperature`; nil leaves the key out, which is the open-time decision
    /// (deterministic decoding assumed).
    public var temperature: Double?
    /// `engineBlocker`. Default `.absent` (key left out).
    public var engineBlocker: EngineBlocker

    public init(drafter: SpeculativeDrafter = .auto, speculation: Speculation = .auto,
                temperature: Double? = nil, engineBlocker: EngineBlocker = .absent) {
        self.drafter = drafter
        self.speculation = speculation
        self.temperature = temperature
        self.engineBlocker = engineBlocker
    }

    /// All defaults: `{"speculation":"auto","speculativeDrafter":"auto"}`.
    public static let `default` = Options()

    /// The engine's option keys, spelled once.
    public enum Key: String, CodingKey, CaseIterable, Sendable {
        case speculation
        case speculativeDrafter
        case temperature
        case engineBlocker
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(speculation, forKey: .speculation)
        try container.encode(drafter, forKey: .speculativeDrafter)
        if let temperature {
            try container.encode(temperature, forKey: .temperature)
        }
        switch engineBlocker {
        case .absent:
            break
        case .none:
            try container.encodeNil(forKey: .engineBlocker)
        case .reason(let reason):
            try container.encode(reason, forKey: .engineBlocker)
        }
    }

    /// The options as one JSON object string (keys sorted), e.g.
    /// `{"speculation":2,"speculativeDrafter":"dflash","temperature":0}`.
    public func json() throws(TsffiError) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        do {
            return String(decoding: try encoder.encode(self), as: UTF8.self)
        } catch {
            throw TsffiError(status: .internal,
                                  message: "SpeculationPreview could not encode the options as JSON: \(error)",
                                  function: "Options.json")
        }
    }
}
