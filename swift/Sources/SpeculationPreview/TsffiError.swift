import Tsffi
import Foundation

/// A status code of the C ABI: the `int32_t` every function returns, as a
/// type a `catch` can match by name.
///
/// The named values are the header's macros (`TSFFI_OK`, `TSFFI_ERR_*`),
/// imported from the C module, so the numbers have one source. A thrown
/// ``TsffiError`` matches its status in a `catch` clause:
///
/// ```swift
/// do {
///     _ = try Tsffi.resolveSpeculationJSON(optionsJSON: text)
/// } catch TsffiStatus.invalidArgument, TsffiStatus.json {
///     // not options the library accepts
/// } catch {
///     // anything else
/// }
/// ```
///
/// To use the error as well, bind it and test its status:
/// `catch let error as TsffiError where error.status == .refused`.
///
/// A value the header does not name (a newer library's) is still
/// representable; its ``description`` is `"status N"`.
public struct TsffiStatus: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The `int32_t` as the C function returned it.
    public let rawValue: Int32

    /// The status a C function returned, named by the header or not.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// `TSFFI_OK`: success.
    public static let ok = TsffiStatus(rawValue: TSFFI_OK)
    /// `TSFFI_ERR_INVALID_ARGUMENT`: an argument the engine's open would
    /// never see: a NULL pointer, text that is not UTF-8, an empty model
    /// name, a bad `tsffi` object (its message names the key, e.g.
    /// `tsffi.temperature`, what it got and what it accepts).
    public static let invalidArgument = TsffiStatus(rawValue: TSFFI_ERR_INVALID_ARGUMENT)
    /// `TSFFI_ERR_REFUSED`: what the engine's open refuses with its status 2:
    /// an option value its mapping refuses (the engine's bare message, e.g.
    /// `speculation block must be in 1..=15, got 0`), and a named block that
    /// cannot be served. The message is the one to show.
    public static let refused = TsffiStatus(rawValue: TSFFI_ERR_REFUSED)
    /// `TSFFI_ERR_JSON`: options the engine's decoder refuses (its status 4):
    /// text that is not JSON, a known key of the wrong JSON type or given
    /// twice; the message is `options: ` and serde_json's own text, with
    /// its ` at line L column C`.
    public static let json = TsffiStatus(rawValue: TSFFI_ERR_JSON)
    /// `TSFFI_ERR_INTERNAL`: anything unexpected, caught at the boundary (also
    /// what this package throws when it cannot decode an answer).
    public static let `internal` = TsffiStatus(rawValue: TSFFI_ERR_INTERNAL)
    /// `TSFFI_ERR_RUNTIME`: the embedded Python runtime could not start;
    /// every later call returns it too.
    public static let runtime = TsffiStatus(rawValue: TSFFI_ERR_RUNTIME)

    /// Every status the header names, with the macro's name: the one table
    /// ``description`` reads.
    public static let named: [(status: TsffiStatus, name: String)] = [
        (.ok, "TSFFI_OK"),
        (.invalidArgument, "TSFFI_ERR_INVALID_ARGUMENT"),
        (.refused, "TSFFI_ERR_REFUSED"),
        (.json, "TSFFI_ERR_JSON"),
        (.internal, "TSFFI_ERR_INTERNAL"),
        (.runtime, "TSFFI_ERR_RUNTIME"),
    ]

    /// The header's macro name (`"TSFFI_ERR_REFUSED"`), or `"status N"` for a
    /// value the header does not name.
    public var description: String {
        Self.named.first { $0.status == self }?.name ?? "status \(rawValue)"
    }

    /// Matches a thrown ``TsffiError`` by its status, so that
    /// `catch TsffiStatus.refused` catches exactly the refusals. Any
    /// other error does not match.
    public static func ~= (status: TsffiStatus, error: any Error) -> Bool {
        (error as? TsffiError)?.status == status
    }

    /// The same match for a typed `throws(TsffiError)` body, whose
    /// `catch` clauses see the concrete type.
    public static func ~= (status: TsffiStatus, error: TsffiError) -> Bool {
        error.status == status
    }
}

/// The one error every call of this package throws: the C status code and the
/// library's own message, verbatim.
///
/// `message` is what `tsffi_last_error` held right after the failing call, byte
/// for byte, so a GUI can show it as it is: for ``status`` ==
/// ``TsffiStatus/refused`` it is the engine's refusal text ("--speculative
/// was asked for but cannot be served: ..."), meant for the user.
public struct TsffiError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the C function returned: one of the header's `TSFFI_ERR_*`
    /// (``TsffiStatus/refused``, ...). A `catch` clause can match it by
    /// name: `catch TsffiStatus.refused`.
    public let status: TsffiStatus
    /// The calling thread's `tsffi_last_error` message, verbatim.
    public let message: String
    /// The C function that failed (`"tsffi_speculation_plan"`, ...).
    public let function: String

    /// An error with this status and message, as thrown by `function`.
    public init(status: TsffiStatus, message: String, function: String) {
        self.status = status
        self.message = message
        self.function = function
    }

    // The status codes under their former place, as the same values, so code
    // written as `error.status == TsffiError.refused` (or `catch
    // TsffiError.refused`) keeps compiling.
    /// ``TsffiStatus/ok``.
    public static let ok = TsffiStatus.ok
    /// ``TsffiStatus/invalidArgument``.
    public static let invalidArgument = TsffiStatus.invalidArgument
    /// ``TsffiStatus/refused``.
    public static let refused = TsffiStatus.refused
    /// ``TsffiStatus/json``.
    public static let json = TsffiStatus.json
    /// ``TsffiStatus/internal``.
    public static let `internal` = TsffiStatus.internal
    /// ``TsffiStatus/runtime``.
    public static let runtime = TsffiStatus.runtime

    /// True for what the engine's open refuses with its status 2
    /// (``TsffiStatus/refused``): an option value, or a named block that
    /// cannot be served.
    public var isRefused: Bool { status == .refused }

    /// The header's name of ``status`` (its ``TsffiStatus/description``).
    public var statusName: String { status.description }

    public var description: String { "\(function): \(status) (\(status.rawValue)): \(message)" }

    /// The calling thread's last error, read right after `function` returned
    /// `status`. Must be called on the thread that made the call, with no
    /// suspension point in between: the message is per thread.
    static func last(status: Int32, function: String) -> TsffiError {
        TsffiError(status: TsffiStatus(rawValue: status), message: lastErrorMessage(),
                        function: function)
    }
}

extension TsffiError: LocalizedError {
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
