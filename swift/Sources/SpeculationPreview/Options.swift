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
/// outside 1...15 (0 included) is refused by the engine's own option mapping
/// before any install is read, and so by the library: status
/// ``TsffiStatus/refused`` with the engine's message
/// (`speculation block must be in 1..=15, got 0`). Any `Int` is passed
/// through as it is, so that message is the library's.
public enum Speculation: Sendable, Hashable, Codable, CustomStringConvertible {
    case auto
    case off
    case block(Int)

    /// The blocks the engine's open accepts: block B verifies B+1 rows and
    /// the batched verify's cap is 16 (docs/ENGINE.md section 3).
    public static let allowedBlocks: ClosedRange<Int> = 1...15

    /// The value an engine spelling names, exactly as the engine's open reads
    /// a `speculation` string (docs/c-api.md, "Options"): `"auto"` or
    /// `"off"` in any ASCII case, or a block in 1...15 as Rust's `u64` parse
    /// reads it: ASCII decimal digits after at most one `+` (leading zeros
    /// allowed: `"02"` and `"+2"` are block 2); nil for any other text
    /// (`"0"`, `"16"`, `" 2"`, `"-2"`, `"2.0"`, `""`, non-ASCII digits or
    /// letters). For an app's own raw values, e.g.
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
        // One "+" before the digits is part of an unsigned number for Rust.
        let unsigned = bytes.first == 0x2B ? bytes.dropFirst() : bytes[...]
        if folded == "auto" {
            self = .auto
        } else if folded == "off" {
            self = .off
        } else if !unsigned.isEmpty, unsigned.allSatisfy({ (0x30...0x39).contains($0) }) {
            // Leading zeros dropped first, so a long run of them is still a
            // small number and nothing overflows.
            let digits = unsigned.drop { $0 == 0x30 }
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
/// (`tsffi.engineBlocker`). Three states, because the library distinguishes
/// them:
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

/// What the preview needs beyond the engine's options, sent as the one
/// namespaced object the engine's open ignores: `"tsffi": {...}`. So one
/// options object still serves both the open and the preview.
///
/// None of them changes the session the open decides (greedy decoding
/// assumed): ``temperature`` and ``lowPowerMode`` are about the TURNS the
/// host then sends (``PlanResult/turn``), ``engineBlocker`` stands in for the
/// engine's own blocker when the host has it.
public struct PreviewOptions: Sendable, Hashable, Encodable {
    /// `tsffi.temperature`: the temperature the host sends its turns at, the
    /// turn's temperature (ABI 4). Only a turn at exactly 0 speculates. nil
    /// leaves the key out: the engine binding's default, 0.2, at which no
    /// turn speculates.
    public var temperature: Double?
    /// `tsffi.engineBlocker`. Default `.absent` (key left out).
    public var engineBlocker: EngineBlocker
    /// `tsffi.lowPowerMode`: the Mac's Low Power Mode
    /// (`ProcessInfo.processInfo.isLowPowerModeEnabled`), which an absent
    /// ``Options/powerProfile`` resolves from: `efficiency` under it, whose
    /// rate control makes every turn sequential. Sent only when true (false
    /// is the library's default).
    public var lowPowerMode: Bool

    public init(temperature: Double? = nil, engineBlocker: EngineBlocker = .absent,
                lowPowerMode: Bool = false) {
        self.temperature = temperature
        self.engineBlocker = engineBlocker
        self.lowPowerMode = lowPowerMode
    }

    /// Nothing set: the `tsffi` object is left out of ``Options/json()``.
    public var isEmpty: Bool { temperature == nil && engineBlocker == .absent && !lowPowerMode }

    /// The `tsffi` object's keys, spelled once (in the order ``Options/json()``
    /// writes them: sorted).
    public enum Key: String, CodingKey, CaseIterable, Sendable {
        case engineBlocker
        case lowPowerMode
        case temperature
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        if let temperature {
            try container.encode(temperature, forKey: .temperature)
        }
        if lowPowerMode {
            try container.encode(true, forKey: .lowPowerMode)
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
}

/// The options a host gives the engine's open, as a Swift value: the
/// engine's 18 keys (docs/c-api.md, "Options") as optional typed fields, and
/// the preview's own inputs under ``preview`` (the `"tsffi"` object).
/// ``json()`` produces the JSON object with the engine's camelCase keys,
/// which is what every call of this package sends; a field that is nil is
/// left out, which is what the open does with an absent key.
///
/// Nothing is validated here: a block outside 1...15, an expert cache size
/// the engine does not offer, a negative temperature, an empty blocker
/// reason are all sent as they are, and the library refuses them with the
/// engine's (or its own) message and status. A non-finite `Double` is sent
/// as the string `"nan"` / `"inf"` / `"-inf"`, which JSON can carry and the
/// library refuses (an engine key: status ``TsffiStatus/json``, serde's
/// `invalid type: string "inf", expected f64`).
public struct Options: Sendable, Hashable, Encodable {
    /// `maxContext`; nil: the engine's default.
    public var maxContext: ContextLimit?
    /// `expertCacheSlots`; nil: the engine's default.
    public var expertCacheSlots: ExpertCacheSlots?
    /// `expertResidency`; nil: the engine's default.
    public var expertResidency: ExpertResidency?
    /// `powerProfile`; nil: resolved by the engine from the OS
    /// (``PreviewOptions/lowPowerMode``). Anything but `performance` turns
    /// the engine's rate control on, and a turn under it never speculates.
    public var powerProfile: PowerProfile?
    /// `loadGuard`; nil: the engine's default.
    public var loadGuard: LoadGuard?
    /// `minAutoContext` (a `u32` for the engine: `UInt32` is its range).
    public var minAutoContext: UInt32?
    /// `maxTokensPerSec`. Any value, 0 included, turns the engine's rate
    /// control on, and a turn under it never speculates.
    public var maxTokensPerSec: Double?
    /// `speculation`. Default `.auto`; always sent.
    public var speculation: Speculation
    /// `speculativeDrafter`. Default `.auto`; always sent.
    public var drafter: SpeculativeDrafter
    /// `steering`: the steering vector's path. The other steering fields
    /// without it are refused by the engine (`steering options given without
    /// a steering vector path`).
    public var steering: String?
    /// `steeringMode`.
    public var steeringMode: SteeringMode?
    /// `steeringScale`.
    public var steeringScale: Double?
    /// `steeringLayers`, sent as `"START:END"` (inclusive, 0-based).
    public var steeringLayers: ClosedRange<Int>?
    /// `steeringTarget`.
    public var steeringTarget: Double?
    /// `steeringGate` (the engine accepts a finite number >= 0).
    public var steeringGate: Double?
    /// `visionSidecar`: a path, or `"auto"` (the open looks in the store).
    /// A tower that attaches makes the verify pass vision-blind: the plan
    /// takes a path to attach, and says so in its warnings.
    public var visionSidecar: String?
    /// `kvBits`.
    public var kvBits: KVBits?
    /// `prefixReuse`.
    public var prefixReuse: Bool?
    /// The preview's own inputs, sent as the `"tsffi"` object (left out
    /// when empty).
    public var preview: PreviewOptions

    public init(drafter: SpeculativeDrafter = .auto, speculation: Speculation = .auto,
                maxContext: ContextLimit? = nil, expertCacheSlots: ExpertCacheSlots? = nil,
                expertResidency: ExpertResidency? = nil,
                powerProfile: PowerProfile? = nil, loadGuard: LoadGuard? = nil,
                minAutoContext: UInt32? = nil, maxTokensPerSec: Double? = nil,
                steering: String? = nil, steeringMode: SteeringMode? = nil,
                steeringScale: Double? = nil, steeringLayers: ClosedRange<Int>? = nil,
                steeringTarget: Double? = nil, steeringGate: Double? = nil,
                visionSidecar: String? = nil, kvBits: KVBits? = nil, prefixReuse: Bool? = nil,
                preview: PreviewOptions = PreviewOptions()) {
        self.maxContext = maxContext
        self.expertCacheSlots = expertCacheSlots
        self.expertResidency = expertResidency
        self.powerProfile = powerProfile
        self.loadGuard = loadGuard
        self.minAutoContext = minAutoContext
        self.maxTokensPerSec = maxTokensPerSec
        self.speculation = speculation
        self.drafter = drafter
        self.steering = steering
        self.steeringMode = steeringMode
        self.steeringScale = steeringScale
        self.steeringLayers = steeringLayers
        self.steeringTarget = steeringTarget
        self.steeringGate = steeringGate
        self.visionSidecar = visionSidecar
        self.kvBits = kvBits
        self.prefixReuse = prefixReuse
        self.preview = preview
    }

    /// The preview's inputs given beside the two speculation keys, as most
    /// callers set them: `Options(speculation: .block(2), temperature: 0.7)`.
    public init(drafter: SpeculativeDrafter = .auto, speculation: Speculation = .auto,
                temperature: Double?, engineBlocker: EngineBlocker = .absent) {
        self.init(drafter: drafter, speculation: speculation,
                  preview: PreviewOptions(temperature: temperature, engineBlocker: engineBlocker))
    }

    /// The same, for an engine blocker alone.
    public init(drafter: SpeculativeDrafter = .auto, speculation: Speculation = .auto,
                engineBlocker: EngineBlocker) {
        self.init(drafter: drafter, speculation: speculation,
                  preview: PreviewOptions(engineBlocker: engineBlocker))
    }

    /// `preview.temperature`: the turn's temperature.
    public var temperature: Double? {
        get { preview.temperature }
        set { preview.temperature = newValue }
    }

    /// `preview.engineBlocker`.
    public var engineBlocker: EngineBlocker {
        get { preview.engineBlocker }
        set { preview.engineBlocker = newValue }
    }

    /// All defaults: `{"speculation":"auto","speculativeDrafter":"auto"}`.
    public static let `default` = Options()

    /// The keys ``json()`` can send: the engine's 18 in its declaration
    /// order (the order a top-level array is read in), then `tsffi`.
    public enum Key: String, CodingKey, CaseIterable, Sendable {
        case maxContext
        case expertCacheSlots
        case expertResidency
        case powerProfile
        case loadGuard
        case minAutoContext
        case maxTokensPerSec
        case speculation
        case speculativeDrafter
        case steering
        case steeringMode
        case steeringScale
        case steeringLayers
        case steeringTarget
        case steeringGate
        case visionSidecar
        case kvBits
        case prefixReuse
        case tsffi

        /// The engine's own 18 keys (every key but `tsffi`).
        public static let engineKeys: [Key] = allCases.filter { $0 != .tsffi }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encodeIfPresent(maxContext, forKey: .maxContext)
        try container.encodeIfPresent(expertCacheSlots, forKey: .expertCacheSlots)
        try container.encodeIfPresent(expertResidency, forKey: .expertResidency)
        try container.encodeIfPresent(powerProfile, forKey: .powerProfile)
        try container.encodeIfPresent(loadGuard, forKey: .loadGuard)
        try container.encodeIfPresent(minAutoContext, forKey: .minAutoContext)
        try container.encodeIfPresent(maxTokensPerSec, forKey: .maxTokensPerSec)
        try container.encode(speculation, forKey: .speculation)
        try container.encode(drafter, forKey: .speculativeDrafter)
        try container.encodeIfPresent(steering, forKey: .steering)
        try container.encodeIfPresent(steeringMode, forKey: .steeringMode)
        try container.encodeIfPresent(steeringScale, forKey: .steeringScale)
        try container.encodeIfPresent(steeringLayers.map { "\($0.lowerBound):\($0.upperBound)" },
                                      forKey: .steeringLayers)
        try container.encodeIfPresent(steeringTarget, forKey: .steeringTarget)
        try container.encodeIfPresent(steeringGate, forKey: .steeringGate)
        try container.encodeIfPresent(visionSidecar, forKey: .visionSidecar)
        try container.encodeIfPresent(kvBits, forKey: .kvBits)
        try container.encodeIfPresent(prefixReuse, forKey: .prefixReuse)
        if !preview.isEmpty {
            try container.encode(preview, forKey: .tsffi)
        }
    }

    /// The options as one JSON object string (keys sorted), e.g.
    /// `{"speculation":2,"speculativeDrafter":"dflash","tsffi":{"temperature":0}}`.
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

// The value types of the engine's keys, nested as the engine's own
// `OpenOptions` nests its enums: an app imports both packages and uses
// their top-level names unqualified, so these add none.
extension Options {
    /// `maxContext`: the longest context the open plans for.
    ///
    /// `.auto` is sent as `"auto"`; `.tokens(n)` as the JSON integer `n`. The
    /// engine accepts an integer in 1...4294967295 (a `u32`, 0 refused since
    /// its revision 0a45c54: `maxContext must be at least 1, or "auto"`); any
    /// other `Int` is sent as it is and refused with the engine's message
    /// (`maxContext must be a non-negative integer, got -1`).
    public enum ContextLimit: Sendable, Hashable, Encodable, CustomStringConvertible {
        case auto
        case tokens(Int)

        public func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .auto: try container.encode("auto")
            case .tokens(let n): try container.encode(n)
            }
        }

        /// `"auto"` or the number of tokens in decimal.
        public var description: String {
            switch self {
            case .auto: "auto"
            case .tokens(let n): String(n)
            }
        }
    }

    /// `expertCacheSlots`: how many routed experts per layer the open keeps
    /// resident.
    ///
    /// `.auto` is sent as `"auto"`; `.slots(n)` as the JSON integer `n`, which
    /// the engine accepts only from ``allowed``; any other `Int` is sent as it is
    /// and refused with the engine's message
    /// (`expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], got 12`).
    public enum ExpertCacheSlots: Sendable, Hashable, Encodable, CustomStringConvertible {
        case auto
        case slots(Int)

        /// The slot counts the engine's open accepts, in its order.
        public static let allowed: [Int] = [8, 16, 24, 32, 48, 64, 96, 128]

        public func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .auto: try container.encode("auto")
            case .slots(let n): try container.encode(n)
            }
        }

        /// `"auto"` or the slot count in decimal.
        public var description: String {
            switch self {
            case .auto: "auto"
            case .slots(let n): String(n)
            }
        }
    }

    /// `loadGuard`: how the open guards memory while it loads.
    ///
    /// A tier is sent as its name (`"off"`, `"relaxed"`, `"balanced"`,
    /// `"strict"`); `.byteCeiling(n)` as the JSON integer `n`, which the engine
    /// accepts when it is > 0 (else `loadGuard as a byte ceiling must be
    /// positive, got 0`).
    public enum LoadGuard: Sendable, Hashable, Encodable, CustomStringConvertible {
        case off
        case relaxed
        case balanced
        case strict
        case byteCeiling(Int)

        /// The four tiers, in the engine's order.
        public static let tiers: [LoadGuard] = [.off, .relaxed, .balanced, .strict]

        public func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .byteCeiling(let n): try container.encode(n)
            default: try container.encode(description)
            }
        }

        /// The tier's name, or the byte ceiling in decimal.
        public var description: String {
            switch self {
            case .off: "off"
            case .relaxed: "relaxed"
            case .balanced: "balanced"
            case .strict: "strict"
            case .byteCeiling(let n): String(n)
            }
        }
    }

    /// `expertResidency`: how the open keeps routed experts, sent as its raw
    /// value (exact spelling: anything else is refused, `expertResidency must
    /// be auto, streamed or mapped, got "Mapped"`).
    public enum ExpertResidency: String, Sendable, Hashable, Encodable, CaseIterable {
        case auto
        case streamed
        case mapped
    }

    /// `powerProfile`, sent as its raw value (exact spelling, as the engine reads it).
    public enum PowerProfile: String, Sendable, Hashable, Encodable, CaseIterable {
        case performance
        case balanced
        case efficiency
    }

    /// `steeringMode`, sent as its raw value.
    public enum SteeringMode: String, Sendable, Hashable, Encodable, CaseIterable {
        case ablate
        case add
        case clamp
        case renorm
    }

    /// `kvBits`: the KV cache's quantization, sent as the engine's string
    /// (`"off"`, `"2"`, `"3"`, `"3.5"`, `"4"`: strings, not numbers, since the
    /// engine's field is a string and `3.5` as a JSON number is refused).
    public enum KVBits: String, Sendable, Hashable, Encodable, CaseIterable {
        case off
        case two = "2"
        case three = "3"
        case threeAndAHalf = "3.5"
        case four = "4"
    }
}
