// The app: the engine's modules and SpeculationPreview's in one file, the
// engine's names unqualified next to ours, as an adapter for the engine
// app's settings pane would write them. Run with a DFlash2-only install:
//
//   EngineApp DIR
//
// Every line it prints is checked, written out, by tests/test_engine_app.py.
import Tsffi
import CTurboSpark
import Foundation
import SpeculationPreview
import TurboSpark
#if FORMER_NAMES
import FormerNames
#endif

/// The app's own settings, as the engine's app keeps them: its own enums,
/// persisted as JSON in the engine's spellings.
struct RuntimeOptions: Codable {
    enum SpeculationMode: String, Codable { case auto, off, block2 = "2", block4 = "4", block8 = "8" }
    enum Drafter: String, Codable { case auto, mtp, dflash }

    var speculation: SpeculationMode = .auto
    var speculativeDrafter: Drafter = .auto
    var contextLength = 8192

    /// What the engine's open takes.
    var openOptions: OpenOptions {
        let speculation: OpenOptions.Speculation
        switch self.speculation {
        case .auto: speculation = .auto
        case .off: speculation = .off
        case let mode: speculation = .block(UInt32(mode.rawValue)!)
        }
        return OpenOptions(speculation: speculation,
                           speculativeDrafter: OpenOptions.SpeculativeDrafter(rawValue: speculativeDrafter.rawValue)!,
                           contextLength: contextLength)
    }

    /// The preview's typed options, read from the same raw values.
    var previewOptions: Options? {
        guard let speculation = Speculation(self.speculation.rawValue),
              let drafter = SpeculativeDrafter(speculativeDrafter.rawValue)
        else {
            return nil
        }
        return Options(drafter: drafter, speculation: speculation)
    }
}

func text(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// The refusal of a named block, as a pane shows it. (A function: Swift
/// 6.3.1 crashes compiling `catch let error as TsffiError where ...` in
/// top-level code of a Swift 5 mode main.swift, "Found ownership error".)
func refusal(modelDir: String, options: Options) -> String {
    do throws(TsffiError) {
        _ = try Tsffi.speculationPlan(modelDir: modelDir, options: options)
        return "no"
    } catch where error.status == .refused {
        return error.message
    } catch {
        return "\(error.status): \(error.message)"
    }
}

/// The whole app on the main actor, as a GUI's is.
@MainActor
func run(modelDir: String) async throws {
    var app = RuntimeOptions()

    // The engine, by its own names: its stand-in answers.
    print("engine abi \(TurboSparkSession.abiVersion) header \(TS_ABI_VERSION)")
    do {
        _ = try TurboSparkSession.open(model: modelDir, options: app.openOptions)
        print("engine open: opened")
    } catch let error as TurboSparkError {
        print("engine open: \(error)")
    }
    // Qualified through the engine's module, as the app may write it.
    let qualified: TurboSpark.OpenOptions = app.openOptions
    print("engine options \(try text(qualified))")

    // The preview, by ours: libtsffi answers.
    print("preview abi \(Tsffi.abiVersion) header \(TSFFI_ABI_VERSION)")
    let plan = try Tsffi.speculationPlan(modelDir: modelDir)
    print("plan: \(plan.drafter.drafter) \(plan.speculation.block.map(String.init) ?? "off"): "
          + (plan.speculation.reason ?? "-"))
    print("refused: \(refusal(modelDir: modelDir, options: Options(speculation: .block(2))))")

    // The engine's last error is still its own after ours, on the thread its
    // call set it (thread-local, like ours): read before the first await,
    // after which the main actor may go on on another thread (on Linux a
    // worker drains the main queue).
    var buffer = [CChar](repeating: 0, count: 256)
    let length = ts_last_error(&buffer, buffer.count)
    let engineError = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    print("engine last error: \(engineError)")

    // The settings model following the app's own settings: one call each.
    let settings = SpeculationSettings()
    app.speculation = .block2
    app.speculativeDrafter = .dflash
    settings.update(modelDir: modelDir, options: app)
    await settings.settled()
    if case .json(let sent)? = settings.answered?.options, let on = settings.plan?.speculation {
        print("settings (the app's JSON \(sent)): on \(on.block.map(String.init) ?? "-") "
              + "(\(on.drafter?.description ?? "-"))")
    }
    app.speculativeDrafter = .auto
    settings.update(modelDir: modelDir, options: app.previewOptions!)
    await settings.settled()
    print("settings (typed from \(app.speculation.rawValue), \(app.speculativeDrafter.rawValue)): "
          + "\(settings.error?.status.description ?? "-") \(settings.error?.message ?? "-")")
    let preview = SpeculationSettings(modelDir: "/preview") { request in
        .failure(TsffiError(status: .runtime, message: "preview of \(request.modelDir ?? "-")", function: "preview"))
    }
    await preview.settled()
    print("custom compute: \(preview.error?.message ?? "-")")
}

try await run(modelDir: CommandLine.arguments[1])

// Every public name of both modules, unqualified: one declared twice would
// not compile here.
let engineNames: [Any.Type] = [
    TurboSparkSession.self, TurboSparkError.self, TurboSparkServer.self, TurboSparkTokenizer.self,
    TurboSparkImageSession.self, TurboSparkAudio.self, TurboSparkCatalog.self, OpenOptions.self,
    OpenOptions.Speculation.self, OpenOptions.SpeculativeDrafter.self, GenerateOptions.self,
    GenerationResult.self, GenerationEvent.self, SessionInfo.self, SessionInfo.Speculation.self,
    PhaseReport.self, ModelRecommendation.self, SystemTelemetry.self, ChatMessage.self,
    WindowFitOutcome.self, JSONValue.self,
]
let previewNames: [Any.Type] = [
    Tsffi.self, Tsffi.Background.self, TsffiError.self, TsffiStatus.self, Options.self, Options.Key.self,
    Speculation.self, SpeculativeDrafter.self, EngineBlocker.self, DrafterChoice.self, DraftMode.self,
    DraftPolicy.self, DraftPolicies.self, SpeculationPlan.self, PlanResult.self, InstallInfo.self,
    BuildInfo.self, SpeculationChoices.self, SpeculationChoice.self, SpeculationSettings.self,
    PreviewOptions.self, Options.ContextLimit.self, Options.ExpertCacheSlots.self, Options.LoadGuard.self,
    Options.PowerProfile.self, Options.SteeringMode.self, Options.KVBits.self,
]
// No type is named after the module, so the module qualifies ours too.
print("names: engine \(engineNames.count), preview \(previewNames.count), "
      + "module-qualified \(SpeculationPreview.Options.self == Options.self)")
