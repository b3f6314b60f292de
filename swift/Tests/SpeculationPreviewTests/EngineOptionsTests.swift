import Foundation
import Testing
@testable import SpeculationPreview

/// ABI 3: the typed options through the library, each answered with the
/// engine's own status and message (TURBOSPARK_FACTS section 10, the open's
/// option stage): 4 for what its decoder refuses, 2 for what its mapping
/// refuses, 1 only for what the open never sees (a bad `tsffi` object).
@Suite struct EngineOptionsTests {
    @Test func theHeaderAndTheLibraryAreABI4() {
        // The turn's temperature and the open's refusals of an install are
        // ABI 4 meanings: a package built against an older header must not
        // run them.
        #expect(Tsffi.headerABIVersion == 4)
        #expect(Tsffi.abiVersion == 4)
        #expect(Tsffi.abiMismatch(loaded: 4, header: 4) == nil)
        // An ABI 2 library says 1 where ABI 3 says 2: every call refuses to read it.
        #expect(Tsffi.abiMismatch(loaded: 2, header: 3)
                == TsffiError(status: .internal,
                              message: "the loaded libtsffi has ABI 2, but SpeculationPreview was built "
                                  + "against tsffi.h ABI 3: its statuses and option rules differ "
                                  + "(docs/CHANGELOG.md); load the library this package was built with",
                              function: "tsffi_abi_version"))
    }

    /// The engine's mapping refuses, in its order, with its bare message.
    static let refusals: [(Options, TsffiStatus, String)] = [
        (Options(speculation: .block(0)), .refused, "speculation block must be in 1..=15, got 0"),
        (Options(speculation: .block(16)), .refused, "speculation block must be in 1..=15, got 16"),
        (Options(maxContext: .tokens(-1)), .refused, "maxContext must be a non-negative integer, got -1"),
        (Options(expertCacheSlots: .slots(12)), .refused,
         #"expertCacheSlots must be "auto" or one of [8, 16, 24, 32, 48, 64, 96, 128], got 12"#),
        (Options(loadGuard: .byteCeiling(0)), .refused, "loadGuard as a byte ceiling must be positive, got 0"),
        // Refused since the engine's 0a45c54 (ABI 4).
        (Options(maxContext: .tokens(0)), .refused, #"maxContext must be at least 1, or "auto""#),
        (Options(steeringMode: .add), .refused, "steering options given without a steering vector path"),
        (Options(steering: "/v.safetensors", steeringGate: -1), .refused,
         "steeringGate must be a finite number >= 0, got -1"),
        (Options(steering: "/v.safetensors", steeringLayers: -1...3), .refused,
         #"steeringLayers must be START:END, inclusive and 0-based, got "-1:3""#),
        // The open checks maxContext before speculation: the first failure is the answer.
        (Options(speculation: .block(0), maxContext: .tokens(-1)), .refused,
         "maxContext must be a non-negative integer, got -1"),
        // A non-finite Double is sent as a string, which the engine's decoder refuses.
        (Options(steeringScale: .infinity), .json,
         #"options: invalid type: string "inf", expected f64 at line 1 column 71"#),
    ]

    @Test func theEnginesRefusalsComeBackWithItsStatusAndMessage() {
        for (options, status, message) in Self.refusals {
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.resolveSpeculation(options: options)
            }
            #expect(error == TsffiError(status: status, message: message, function: "tsffi_resolve_speculation"),
                    "\(options)")
        }
    }

    /// What the engine accepts, the library accepts: every typed value in range.
    @Test func everyValueTheEngineAcceptsPlans() throws {
        let accepted: [Options] = [
            Options(maxContext: .auto), Options(maxContext: .tokens(1)), Options(maxContext: .tokens(4_294_967_295)),
            Options(expertCacheSlots: .auto), Options(powerProfile: .balanced),
            Options(prefixReuse: true), Options(prefixReuse: false),
            Options(loadGuard: .relaxed), Options(loadGuard: .byteCeiling(1)),
            Options(minAutoContext: UInt32.max), Options(maxTokensPerSec: 30),
            Options(steering: "/v.safetensors", steeringMode: .renorm, steeringScale: 1.5,
                    steeringLayers: 0...0, steeringTarget: -2, steeringGate: 0),
            Options(visionSidecar: "/m/vision"),
        ] + Options.ExpertCacheSlots.allowed.map { Options(expertCacheSlots: .slots($0)) }
            + Options.KVBits.allCases.map { Options(kvBits: $0) }
            + Options.ExpertResidency.allCases.map { Options(expertResidency: $0) }
        for options in accepted {
            #expect(try Tsffi.resolveSpeculation(options: options)
                    == SpeculationPlan(block: 2, drafter: .mtp, reason: nil), "\(options)")
        }
    }

    /// The two keys of the engine's 0a45c54, typed, in the table's order, and
    /// what the open refuses of them (an exact spelling; a bool).
    @Test func theNewKeysAreSentAndChecked() throws {
        #expect(try Options(expertResidency: .mapped, prefixReuse: true).json()
                == #"{"expertResidency":"mapped","prefixReuse":true,"speculation":"auto","speculativeDrafter":"auto"}"#)
        #expect(Options.Key.engineKeys.count == 18)
        let refused = thrownError { () throws(TsffiError) in
            try Tsffi.resolveSpeculationJSON(optionsJSON: #"{"expertResidency": "Mapped"}"#)
        }
        #expect(refused == TsffiError(status: .refused,
                                      message: #"expertResidency must be auto, streamed or mapped, got "Mapped""#,
                                      function: "tsffi_resolve_speculation"))
        let notBool = thrownError { () throws(TsffiError) in
            try Tsffi.resolveSpeculationJSON(optionsJSON: #"{"prefixReuse": 1}"#)
        }
        #expect(notBool?.status == .json)
        #expect(PreviewOptions(lowPowerMode: true).isEmpty == false)
        #expect(try Options(preview: PreviewOptions(temperature: 0, lowPowerMode: true)).json()
                == #"{"speculation":"auto","speculativeDrafter":"auto","tsffi":{"lowPowerMode":true,"temperature":0}}"#)
    }

    @Test func theDecodersRefusalsAreStatusJSON() {
        let cases: [(String, String)] = [
            (#"{"maxContext":1,"maxContext":2}"#, "options: duplicate field `maxContext` at line 1 column 28"),
            (#"{"minAutoContext":"x","speculation":3}"#,
             #"options: invalid type: string "x", expected u32 at line 1 column 21"#),
            (#"{"speculativeDrafter":1}"#, "options: invalid type: integer `1`, expected a string at line 1 column 23"),
        ]
        for (text, message) in cases {
            let error = thrownError { () throws(TsffiError) in
                try Tsffi.resolveSpeculationJSON(optionsJSON: text)
            }
            #expect(error == TsffiError(status: .json, message: message, function: "tsffi_resolve_speculation"),
                    "\(text)")
        }
    }
}
