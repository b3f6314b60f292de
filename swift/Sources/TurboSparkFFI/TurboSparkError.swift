import CTurboSparkFFI
import Foundation

/// The one error every call of this package throws: the C status code and the
/// library's own message, verbatim.
///
/// `message` is what `tsffi_last_error` held right after the failing call, byte
/// for byte, so a GUI can show it as it is: for ``status`` ==
/// ``TurboSparkError/refused`` it is the engine's refusal text ("--speculative
/// was asked for but cannot be served: ..."), meant for the user.
public struct TurboSparkError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The `int32_t` the C function returned: one of the header's `TSFFI_ERR_*`.
    public let status: Int32
    /// The calling thread's `tsffi_last_error` message, verbatim.
    public let message: String
    /// The C function that failed (`"tsffi_speculation_plan"`, ...).
    public let function: String

    public init(status: Int32, message: String, function: String) {
        self.status = status
        self.message = message
        self.function = function
    }

    // The header's status codes, re-exported so a host need not import the C
    // module to compare them. Taken from the header's macros: one source.
    public static let ok: Int32 = TSFFI_OK
    /// A NULL pointer, text that is not UTF-8, an option value outside its
    /// set, a near-miss option key.
    public static let invalidArgument: Int32 = TSFFI_ERR_INVALID_ARGUMENT
    /// A named speculation block that cannot be served (the engine's open
    /// returns 2 for this same refusal). The message is the one to show.
    public static let refused: Int32 = TSFFI_ERR_REFUSED
    /// A JSON argument that does not parse or is not an object.
    public static let json: Int32 = TSFFI_ERR_JSON
    /// Anything unexpected, caught at the boundary.
    public static let `internal`: Int32 = TSFFI_ERR_INTERNAL
    /// The embedded Python runtime could not start; every later call returns
    /// it too.
    public static let runtime: Int32 = TSFFI_ERR_RUNTIME

    /// True for the refusal of a named block (``refused``).
    public var isRefused: Bool { status == Self.refused }

    /// The header's name of ``status``.
    public var statusName: String {
        switch status {
        case Self.ok: return "TSFFI_OK"
        case Self.invalidArgument: return "TSFFI_ERR_INVALID_ARGUMENT"
        case Self.refused: return "TSFFI_ERR_REFUSED"
        case Self.json: return "TSFFI_ERR_JSON"
        case Self.internal: return "TSFFI_ERR_INTERNAL"
        case Self.runtime: return "TSFFI_ERR_RUNTIME"
        default: return "status \(status)"
        }
    }

    public var description: String { "\(function): \(statusName) (\(status)): \(message)" }

    /// The calling thread's last error, read right after `function` returned
    /// `status`. Must be called on the thread that made the call, with no
    /// suspension point in between: the message is per thread.
    static func last(status: Int32, function: String) -> TurboSparkError {
        TurboSparkError(status: status, message: lastErrorMessage(), function: function)
    }
}

extension TurboSparkError: LocalizedError {
    /// The library's message, verbatim: what `localizedDescription` shows.
    public var errorDescription: String? { message }
}

/// The calling thread's `tsffi_last_error` message ("" when there is none).
/// Asks for the length first, then copies the whole message.
func lastErrorMessage() -> String {
    let length = tsffi_last_error(nil, 0)
    if length == 0 {
        return ""
    }
    let capacity = length + 1
    let bytes = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
        let full = buffer.withMemoryRebound(to: CChar.self) { chars in
            tsffi_last_error(chars.baseAddress, capacity)
        }
        // The message cannot change between the two calls (nothing on this
        // thread ran in between), but never read past what was written.
        let written = min(full, length)
        initialized = written
        if written < capacity {
            buffer[written] = 0
        }
    }
    return String(decoding: bytes, as: UTF8.self)
}
