// A stand-in of the engine's Swift module `TurboSpark` (tests only): every
// public name the engine's module declares (docs/ENGINE.md section 7), so an
// app that imports it beside SpeculationPreview sees every name it would see.
// Only the NAMES matter for a clash; the shapes are plausible, and the one
// call that reaches C (TurboSparkSession.open) goes through the stand-in's
// ts_session_open and ts_last_error, so a test sees which library answered.
import CTurboSpark
import Foundation

/// The engine's error: untyped `throws`, a code and the library's last error.
public struct TurboSparkError: Error, CustomStringConvertible {
    public let code: Int32
    public let message: String

    public init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    /// The calling thread's ts_last_error, right after a call returned `code`.
    static func last(_ code: Int32) -> TurboSparkError {
        var buffer = [CChar](repeating: 0, count: 512)
        let length = ts_last_error(&buffer, buffer.count)
        let bytes = buffer.prefix(min(length, buffer.count - 1)).map { UInt8(bitPattern: $0) }
        return TurboSparkError(code: code, message: String(decoding: bytes, as: UTF8.self))
    }

    public var description: String { "TurboSparkError \(code): \(message)" }
}

/// What the engine's open takes, with its NESTED speculation enums.
public struct OpenOptions: Codable, Sendable, Hashable {
    public enum Speculation: Codable, Sendable, Hashable {
        case auto
        case off
        case block(UInt32)

        public func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .auto: try container.encode("auto")
            case .off: try container.encode("off")
            case .block(let n): try container.encode(n)
            }
        }

        public init(from decoder: Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let n = try? container.decode(UInt32.self) {
                self = .block(n)
            } else {
                self = try container.decode(String.self).lowercased() == "off" ? .off : .auto
            }
        }
    }

    public enum SpeculativeDrafter: String, Codable, Sendable, Hashable, CaseIterable {
        case auto
        case mtp
        case dflash
    }

    public var speculation: Speculation
    public var speculativeDrafter: SpeculativeDrafter
    public var contextLength: Int

    public init(speculation: Speculation = .auto, speculativeDrafter: SpeculativeDrafter = .auto,
                contextLength: Int = 8192) {
        self.speculation = speculation
        self.speculativeDrafter = speculativeDrafter
        self.contextLength = contextLength
    }
}

/// What the host reads back after open, with its NESTED `Speculation`.
public struct SessionInfo: Codable, Sendable, Hashable {
    public struct Speculation: Codable, Sendable, Hashable {
        public var block: UInt32?
        public var drafter: String?
        public var reason: String?
    }

    public var speculation: Speculation
}

public final class TurboSparkSession {
    /// `ts_abi_version()` of the library that is linked.
    public static var abiVersion: UInt32 { ts_abi_version() }

    private init() {}

    /// `ts_session_open`: the stand-in refuses every open with its own
    /// status and message.
    public static func open(model: String, options: OpenOptions = OpenOptions()) throws -> TurboSparkSession {
        let json = String(decoding: try JSONEncoder().encode(options), as: UTF8.self)
        var session: OpaquePointer? = nil
        let status = ts_session_open(model, json, &session)
        guard status == TS_OK, session != nil else {
            throw TurboSparkError.last(status)
        }
        return TurboSparkSession()
    }
}

public struct GenerateOptions: Codable, Sendable, Hashable {
    public var maxTokens: Int
    public var temperature: Double
    public init(maxTokens: Int = 256, temperature: Double = 0) {
        self.maxTokens = maxTokens
        self.temperature = temperature
    }
}

public struct GenerationResult: Codable, Sendable, Hashable {
    public var text: String
}

public enum GenerationEvent: Sendable, Hashable {
    case prefill(Int)
    case content(String)
    case reasoning(String)
}

public struct ChatMessage: Codable, Sendable, Hashable {
    public var role: String
    public var content: String
}

public struct PhaseReport: Codable, Sendable, Hashable {
    public var phase: String
}

public struct ModelRecommendation: Codable, Sendable, Hashable {
    public var alias: String
}

public struct SystemTelemetry: Codable, Sendable, Hashable {
    public var peakFootprintBytes: UInt64
}

public enum WindowFitOutcome: Sendable, Hashable {
    case fits
    case truncated(Int)
}

public indirect enum JSONValue: Codable, Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

public final class TurboSparkServer {}
public final class TurboSparkTokenizer {}
public final class TurboSparkImageSession {}
public final class TurboSparkAudio {}
public enum TurboSparkCatalog {}
