// The JSON shapes of the C ABI as Codable values. Every key of the wire is a
// property of the same name; a JSON null is a Swift nil. Encoding writes the
// nulls back (rather than leaving keys out), so what Swift encodes is the wire
// shape again -- which tsffi_draft_policies requires of the choice it is given.

/// What `tsffi_resolve_drafter` decided: the drafter to open, what the install's
/// index says it carries, and the note for the case where `auto` found a
/// DFlash2 drafter and left it off.
public struct DrafterChoice: Codable, Sendable, Hashable {
    /// The drafter to open: `.mtp` or `.dflash` (the request, when it named one).
    public var drafter: SpeculativeDrafter
    /// Whether the install carries an MTP head: `nil` means the index could not
    /// be read ("unknown"), never "absent".
    public var installHasMtpHead: Bool?
    /// Whether the install carries a DFlash2 drafter, with the same three states.
    public var installHasDflash: Bool?
    /// Set when `auto` found a DFlash2 drafter and left it off: show it verbatim.
    public var note: String?
    /// The directory that was read, as an absolute path: the model name
    /// resolved as the engine's open resolves it (a directory, or an installed
    /// alias). Set by ``Tsffi/resolveDrafter(modelDir:options:)``; nil in
    /// a plan's ``PlanResult/drafter`` (the plan says it once, in
    /// ``PlanResult/modelDir``) and in a choice made by hand.
    public var modelDir: String?

    public init(drafter: SpeculativeDrafter, installHasMtpHead: Bool?, installHasDflash: Bool?,
                note: String?, modelDir: String? = nil) {
        self.drafter = drafter
        self.installHasMtpHead = installHasMtpHead
        self.installHasDflash = installHasDflash
        self.note = note
        self.modelDir = modelDir
    }

    private enum CodingKeys: String, CodingKey {
        case drafter, installHasMtpHead, installHasDflash, note, modelDir
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(drafter, forKey: .drafter)
        try container.encode(installHasMtpHead, forKey: .installHasMtpHead)
        try container.encode(installHasDflash, forKey: .installHasDflash)
        try container.encode(note, forKey: .note)
        // Only when known: the wire's choice has it as a string or not at all.
        try container.encodeIfPresent(modelDir, forKey: .modelDir)
    }
}

/// A draft policy's mode at open.
public enum DraftMode: String, Codable, Sendable, Hashable, CaseIterable {
    /// The drafter's state is never built.
    case off
    /// Built if and only if the install carries the drafter.
    case auto
    /// Built at ``DraftPolicy/block``; the open fails if the install lacks it.
    case fixed
}

/// One drafter's policy: `block` is set only for `.fixed`.
public struct DraftPolicy: Codable, Sendable, Hashable {
    public var mode: DraftMode
    public var block: Int?

    public init(mode: DraftMode, block: Int? = nil) {
        self.mode = mode
        self.block = block
    }

    public static let off = DraftPolicy(mode: .off)
    public static let auto = DraftPolicy(mode: .auto)
    public static func fixed(_ block: Int) -> DraftPolicy { DraftPolicy(mode: .fixed, block: block) }

    private enum CodingKeys: String, CodingKey { case mode, block }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(mode, forKey: .mode)
        try container.encode(block, forKey: .block)
    }
}

/// The draft policies to open a runner with (`tsffi_draft_policies`): the
/// drafter the request named owns it and the other is pinned off.
public struct DraftPolicies: Codable, Sendable, Hashable {
    public var mtp: DraftPolicy
    public var dflash: DraftPolicy

    public init(mtp: DraftPolicy, dflash: DraftPolicy) {
        self.mtp = mtp
        self.dflash = dflash
    }
}

/// Whether speculation will run (`tsffi_resolve_speculation`): the engine's own
/// sessionInfo `"speculation"` object, so one type decodes both.
public struct SpeculationPlan: Codable, Sendable, Hashable {
    /// The block, or nil: nil is the "is it on" test.
    public var block: Int?
    /// The drafter, non-nil exactly when ``block`` is.
    public var drafter: SpeculativeDrafter?
    /// Why it is off when the caller might have expected it on: nil when it
    /// is on, and when the caller asked for off. Show it verbatim.
    public var reason: String?

    public init(block: Int?, drafter: SpeculativeDrafter?, reason: String?) {
        self.block = block
        self.drafter = drafter
        self.reason = reason
    }

    /// `block != nil`.
    public var isEnabled: Bool { block != nil }

    private enum CodingKeys: String, CodingKey { case block, drafter, reason }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(block, forKey: .block)
        try container.encode(drafter, forKey: .drafter)
        try container.encode(reason, forKey: .reason)
    }
}

/// Whether a turn the host sends on the session speculates (ABI 4): the
/// session's ``SpeculationPlan`` is decided at open as though every turn were
/// greedy, and through the engine's C ABI a turn then speculates only at
/// temperature exactly 0 with the engine's rate control off (no
/// `maxTokensPerSec`, a power profile resolving to `performance`). Otherwise
/// it decodes sequentially, silently: ``reason`` says why, for the pane to
/// show ("greedy only", as the engine's own app does after open).
public struct Turn: Codable, Sendable, Hashable {
    /// The turn's temperature: ``PreviewOptions/temperature``, or the engine
    /// binding's default, 0.2, when it was not given.
    public var temperature: Double
    /// The turn runs the speculative loop.
    public var speculates: Bool
    /// Why a turn on a session that drafts will not speculate (the
    /// temperature, `maxTokensPerSec`, the power profile, Low Power Mode), in
    /// words a pane can show verbatim; nil when it speculates, and when the
    /// session does not draft (then ``SpeculationPlan/reason`` says why).
    public var reason: String?

    public init(temperature: Double, speculates: Bool, reason: String?) {
        self.temperature = temperature
        self.speculates = speculates
        self.reason = reason
    }

    private enum CodingKeys: String, CodingKey { case temperature, speculates, reason }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(temperature, forKey: .temperature)
        try container.encode(speculates, forKey: .speculates)
        try container.encode(reason, forKey: .reason)
    }
}

/// The whole decision for an install (`tsffi_speculation_plan`).
public struct PlanResult: Codable, Sendable, Hashable {
    /// The drafter choice, as ``Tsffi/resolveDrafter(modelDir:options:)``.
    public var drafter: DrafterChoice
    /// The policies to open with, as ``Tsffi/draftPolicies(choice:options:)``.
    public var draftPolicies: DraftPolicies
    /// Whether the session drafts (the open's answer, greedy decoding
    /// assumed), and if not, why.
    public var speculation: SpeculationPlan
    /// Whether a turn sent at ``PreviewOptions/temperature`` speculates on
    /// that session, and if not while the session drafts, why.
    public var turn: Turn
    /// Whose answer ``speculation`` is: the preview's, or the engine's own
    /// after ``Tsffi/reconcile(modelDir:optionsJSON:engine:)`` found the
    /// preview disagreeing with the real open (``warnings`` then says how).
    public var source: PlanSource
    /// Top-level option keys the engine's open does not read, so ignores, in
    /// the order given (a host passes its whole open-options object; `tsffi`
    /// is never listed).
    public var ignoredKeys: [String]
    /// Hints about the options that change nothing: a key that resembles one
    /// of the engine's keys (`"Speculation"`), a key that moved into the
    /// `tsffi` object (`temperature`, `engineBlocker`). The open ignores such
    /// keys; show these beside the plan, verbatim.
    public var warnings: [String]
    /// The directory that was read, as an absolute path: the model name
    /// resolved as the engine's open resolves it (a directory, or an alias
    /// recorded in the store's installed.json, or its default install path).
    public var modelDir: String?

    public init(drafter: DrafterChoice, draftPolicies: DraftPolicies, speculation: SpeculationPlan,
                turn: Turn, source: PlanSource = .preview, ignoredKeys: [String] = [],
                warnings: [String] = [],
                modelDir: String? = nil) {
        self.drafter = drafter
        self.draftPolicies = draftPolicies
        self.speculation = speculation
        self.turn = turn
        self.source = source
        self.ignoredKeys = ignoredKeys
        self.warnings = warnings
        self.modelDir = modelDir
    }

    private enum CodingKeys: String, CodingKey {
        case drafter, draftPolicies, speculation, turn, source, ignoredKeys, warnings, modelDir
    }

    /// Reads the plan call's object, and an item's plan in a
    /// ``SpeculationChoices`` table, which leaves out `ignoredKeys`,
    /// `warnings` and `modelDir` (the table's own; the table puts them back).
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        drafter = try container.decode(DrafterChoice.self, forKey: .drafter)
        draftPolicies = try container.decode(DraftPolicies.self, forKey: .draftPolicies)
        speculation = try container.decode(SpeculationPlan.self, forKey: .speculation)
        turn = try container.decode(Turn.self, forKey: .turn)
        source = try container.decodeIfPresent(PlanSource.self, forKey: .source) ?? .preview
        ignoredKeys = try container.decodeIfPresent([String].self, forKey: .ignoredKeys) ?? []
        warnings = try container.decodeIfPresent([String].self, forKey: .warnings) ?? []
        modelDir = try container.decodeIfPresent(String.self, forKey: .modelDir)
    }

    /// The plan call's shape, every key present.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try encodeDecision(to: &container)
        try container.encode(ignoredKeys, forKey: .ignoredKeys)
        try container.encode(warnings, forKey: .warnings)
        try container.encode(modelDir, forKey: .modelDir)
    }

    /// A table item's shape: the decision only.
    func encodeAsItem(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try encodeDecision(to: &container)
    }

    /// The session as the engine's own app shows it after open:
    /// `"{drafter} x{block}, greedy only"` (`"mtp x2, greedy only"`): the
    /// session drafts, and only a greedy turn speculates. nil when the
    /// session does not draft (``SpeculationPlan/reason`` says why).
    public var sessionSummary: String? {
        guard let block = speculation.block, let drafter = speculation.drafter else { return nil }
        return "\(drafter.rawValue) x\(block), greedy only"
    }

    private func encodeDecision(to container: inout KeyedEncodingContainer<CodingKeys>) throws {
        try container.encode(drafter, forKey: .drafter)
        try container.encode(draftPolicies, forKey: .draftPolicies)
        try container.encode(speculation, forKey: .speculation)
        try container.encode(turn, forKey: .turn)
        try container.encode(source, forKey: .source)
    }
}

/// Whose answer a plan's speculation is.
public enum PlanSource: String, Codable, Sendable, Hashable {
    /// The library's preview of the engine's decision.
    case preview
    /// The engine's own outcome, which a host reported through
    /// ``Tsffi/reconcile(modelDir:optionsJSON:engine:)`` after the preview
    /// disagreed with it.
    case engine
}

/// What an open decided, or that it failed: one side of a ``Reconciliation``.
public struct OpenOutcome: Codable, Sendable, Hashable {
    /// 0 for an open; otherwise the failed open's status (the engine's
    /// number: 2 for its refusals, 4 for options its decoder refuses).
    public var status: Int32
    /// The session's speculation, for an open (`status == 0`); nil otherwise.
    public var speculation: SpeculationPlan?
    /// The failed open's message, verbatim; nil for an open.
    public var message: String?

    public init(status: Int32, speculation: SpeculationPlan? = nil, message: String? = nil) {
        self.status = status
        self.speculation = speculation
        self.message = message
    }

    /// Whether the open succeeded.
    public var opened: Bool { status == 0 }
}

/// The preview held against what the engine's real open reported
/// (`tsffi_reconcile`).
public struct Reconciliation: Codable, Sendable, Hashable {
    /// Whether the two outcomes are the same.
    public var agrees: Bool
    /// What ``Tsffi/speculationPlan(modelDir:optionsJSON:)`` previews: its
    /// speculation, or its refusal where the refusal is the open's own.
    public var preview: OpenOutcome
    /// What the engine reported.
    public var engine: OpenOutcome
    /// The fields that differ: "status", "message", "speculation.block",
    /// "speculation.drafter", "speculation.reason"; empty when they agree.
    public var differences: [String]
    /// The engine revision the preview mirrors, as build info reports it.
    public var revision: EngineRevision
}

/// Which engine a preview mirrors (``BuildInfo`` says the same): the engine,
/// the version of its speculation policy, and the revision (commit) each
/// other rule follows, by part ("open", "manifest", "blockers", ...).
public struct EngineRevision: Codable, Sendable, Hashable {
    public var engine: String
    public var engineVersion: String
    public var engineRevisions: [String: String]

    public init(engine: String, engineVersion: String, engineRevisions: [String: String]) {
        self.engine = engine
        self.engineVersion = engineVersion
        self.engineRevisions = engineRevisions
    }
}

/// What an install's files say (`tsffi_install_info_json`), so a GUI can show
/// why an answer is "unknown". Keys the library adds later are ignored; keys
/// that are missing decode as nil.
public struct InstallInfo: Codable, Sendable, Hashable {
    public struct Drafter: Codable, Sendable, Hashable {
        /// The drafter's presence tensor is in the index.
        public var present: Bool
        /// How many of its tensors are there, of how many expected.
        public var tensors: Int
        public var expected: Int
        public var complete: Bool
        /// The missing tensors, listed only for a partial drafter.
        public var missing: [String]
    }

    public struct Probe: Codable, Sendable, Hashable {
        public var layer: Int
        public var tensor: String
        public var present: Bool
        public var dtype: Int?
        public var dtypeName: String?
        public var verifyCovers: Bool
    }

    public struct Experts: Codable, Sendable, Hashable {
        public var layoutPresent: Bool?
        public var expertsPerLayer: Int?
        public var numLayers: Int?
        public var error: String?
    }

    public struct BlockerPreview: Codable, Sendable, Hashable {
        public var mtp: String?
        public var dflash: String?
    }

    /// manifest.json's `arch` as the engine's open reads it (first): the
    /// facts its blockers and drafter checks take.
    public struct Arch: Codable, Sendable, Hashable {
        public var family: String
        public var hiddenSize: Int
        public var vocabSize: Int
        public var numLayers: Int
        /// Routed experts (0: dense); the MoE arm of the blockers reads it.
        public var numExperts: Int
        /// Per layer: 2 linear attention, 1 full, 0 sliding window.
        public var fullAttentionLayerMask: [Int]
        /// A vision tower's depth (0: none): a tower makes the verify pass
        /// vision-blind.
        public var visionDepth: Int
        /// The verify probe's layer: the first layer the mask does not mark
        /// linear (nil: none).
        public var firstFullAttentionLayer: Int?

        public init(family: String, hiddenSize: Int, vocabSize: Int, numLayers: Int, numExperts: Int,
                    fullAttentionLayerMask: [Int], visionDepth: Int, firstFullAttentionLayer: Int?) {
            self.family = family
            self.hiddenSize = hiddenSize
            self.vocabSize = vocabSize
            self.numLayers = numLayers
            self.numExperts = numExperts
            self.fullAttentionLayerMask = fullAttentionLayerMask
            self.visionDepth = visionDepth
            self.firstFullAttentionLayer = firstFullAttentionLayer
        }
    }

    public var modelDir: String?
    public var indexReadable: Bool
    public var indexError: String?
    public var indexCheck: String?
    /// nil when the manifest's `arch` is missing or invalid (``manifestError``
    /// then says why, in the open's words).
    public var arch: Arch?
    public var manifestError: String?
    /// The open's refusal of the install whatever the options ask (not a
    /// directory, the manifest, the index, a dtype gate), in its words; nil
    /// when the open gets past the install's files. When set, the plan and
    /// choices calls fail with it (``TsffiStatus/refused``) and
    /// ``blockerPreview`` is not asked (its nils mean nothing).
    public var openError: String?
    public var entryCount: Int?
    public var indexBytes: Int?
    public var residentBytes: Int?
    /// nil when the index could not be read.
    public var installHasMtpHead: Bool?
    /// nil when the index could not be read.
    public var installHasDflash: Bool?
    public var mtpHead: Drafter?
    public var dflashDrafter: Drafter?
    public var probe: Probe?
    public var experts: Experts?
    public var blockerPreview: BlockerPreview?
}

/// The library's build information (`tsffi_build_info_json`).
public struct BuildInfo: Codable, Sendable, Hashable {
    public var abiVersion: UInt32
    public var version: String
    public var python: String
    /// The path of the shared library that is loaded.
    public var library: String
    /// The path of the Python package it runs.
    public var package: String
    public var pythonHome: String?
    public var pythonExecutable: String?
    public var sysPath: [String]?
    public var ownsInterpreter: Bool?
    /// The engine whose policy and messages the library speaks, byte for byte
    /// ("turbospark-runtime").
    public var engine: String?
    /// That engine's version ("0.3.0"): a change to any text the library shows
    /// is a change of it, so a host matching on the engine's messages reads
    /// here which ones it will see.
    public var engineVersion: String?
    /// The engine revision each rule the library follows is read from
    /// (`"blockers": "22f47a2"`, `"open": "0a45c54"`, ...; docs/ENGINE.md).
    public var engineRevisions: [String: String]?
}

/// The store a model name is resolved against, as a model picker lists it
/// (`tsffi_store_json`): each installed alias a `modelDir` may name, with the
/// badges of its install. The library reads the store's installed.json as
/// the engine does (all or nothing, a later row of an alias winning), so a
/// picker built on this offers exactly the aliases a plan resolves.
public struct Store: Codable, Sendable, Hashable {
    public struct Alias: Codable, Sendable, Hashable {
        /// The name to pass as `modelDir`.
        public var alias: String
        /// The install's directory as installed.json records it.
        public var path: String
        /// The directory a plan of `alias` reads, as an absolute path.
        public var modelDir: String
        /// The install's two drafters, as its index says (nil: it could not be read).
        public var installHasMtpHead: Bool?
        public var installHasDflash: Bool?

        public init(alias: String, path: String, modelDir: String, installHasMtpHead: Bool?,
                    installHasDflash: Bool?) {
            self.alias = alias
            self.path = path
            self.modelDir = modelDir
            self.installHasMtpHead = installHasMtpHead
            self.installHasDflash = installHasDflash
        }
    }

    /// The store root (`TURBOSPARK_HOME`, else `$HOME/.turbospark`; "" is the
    /// current directory); nil when neither variable is set.
    public var root: String?
    /// The absolute path of the root's installed.json (nil: no root).
    public var storeFile: String?
    /// The file was read and decoded; false with `reason` saying why not.
    public var storeRead: Bool
    public var reason: String?
    /// Each alias that counts, in the order the aliases first appear.
    public var aliases: [Alias]
}

/// Every item of a settings pane's two pickers for one install
/// (`tsffi_speculation_choices`): speculation `.auto`, `.off`, `.block(1)` ...
/// `.block(15)` (outer) by drafter `.auto`, `.mtp`, `.dflash` (inner), 51
/// items. Each item is what ``Tsffi/speculationPlan(modelDir:options:)``
/// answers for the options with that item's two values.
public struct SpeculationChoices: Codable, Sendable, Hashable {
    /// What the install's index says it carries (nil: it could not be read).
    public struct Install: Codable, Sendable, Hashable {
        public var installHasMtpHead: Bool?
        public var installHasDflash: Bool?

        public init(installHasMtpHead: Bool?, installHasDflash: Bool?) {
            self.installHasMtpHead = installHasMtpHead
            self.installHasDflash = installHasDflash
        }

        private enum CodingKeys: String, CodingKey { case installHasMtpHead, installHasDflash }

        public func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(installHasMtpHead, forKey: .installHasMtpHead)
            try container.encode(installHasDflash, forKey: .installHasDflash)
        }
    }

    /// The install directory, as the library read it.
    public var modelDir: String
    public var install: Install
    /// The 51 items, in the library's order.
    public var choices: [SpeculationChoice]
    /// Option keys the open ignores, as in ``PlanResult/ignoredKeys``: said
    /// once for the table (every item has the same options but two keys).
    public var ignoredKeys: [String]
    /// Hints about the options, as in ``PlanResult/warnings``, once for the table.
    public var warnings: [String]

    public init(modelDir: String, install: Install, choices: [SpeculationChoice],
                ignoredKeys: [String] = [], warnings: [String] = []) {
        self.modelDir = modelDir
        self.install = install
        self.choices = choices
        self.ignoredKeys = ignoredKeys
        self.warnings = warnings
    }

    private enum CodingKeys: String, CodingKey {
        case modelDir, install, choices, ignoredKeys, warnings
    }

    /// Reads the table. The wire says `modelDir`, `ignoredKeys` and
    /// `warnings` once, at the top; each item's ``SpeculationChoice/plan``
    /// is given them back here, so an item's plan equals what
    /// ``Tsffi/speculationPlan(modelDir:options:)`` returns for it.
    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        modelDir = try container.decode(String.self, forKey: .modelDir)
        install = try container.decode(Install.self, forKey: .install)
        let ignoredKeys = try container.decode([String].self, forKey: .ignoredKeys)
        let warnings = try container.decodeIfPresent([String].self, forKey: .warnings) ?? []
        let modelDir = self.modelDir
        self.ignoredKeys = ignoredKeys
        self.warnings = warnings
        choices = try container.decode([SpeculationChoice].self, forKey: .choices).map { item in
            var item = item
            item.plan?.ignoredKeys = ignoredKeys
            item.plan?.warnings = warnings
            item.plan?.modelDir = modelDir
            return item
        }
    }

    /// The wire's shape again (items' plans without the table's keys).
    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(modelDir, forKey: .modelDir)
        try container.encode(install, forKey: .install)
        try container.encode(choices, forKey: .choices)
        try container.encode(ignoredKeys, forKey: .ignoredKeys)
        try container.encode(warnings, forKey: .warnings)
    }

    /// The item for one speculation value and drafter, if the table has it
    /// (every `.block(n)` with n in 1...15 and every drafter are items).
    public func choice(speculation: Speculation, drafter: SpeculativeDrafter) -> SpeculationChoice? {
        choices.first { $0.speculation == speculation && $0.speculativeDrafter == drafter }
    }

    /// The item matching the options the table was asked with.
    public var selected: SpeculationChoice? { choices.first { $0.selected } }
}

/// One item of ``SpeculationChoices``: the plan call's answer for it.
public struct SpeculationChoice: Codable, Sendable, Hashable {
    /// The item's speculation value (`.auto`, `.off` or `.block(n)`).
    public var speculation: Speculation
    /// The item's requested drafter (`.auto`, `.mtp` or `.dflash`).
    public var speculativeDrafter: SpeculativeDrafter
    /// What the plan call returns for it: ``TsffiStatus/ok`` or
    /// ``TsffiStatus/refused``.
    public var status: TsffiStatus
    /// The plan, exactly as the plan call returns it (the table's
    /// `ignoredKeys`, `warnings` and `modelDir` included); nil when refused.
    public var plan: PlanResult?
    /// The plan call's last error when refused: the message to show (a
    /// tooltip on a greyed-out item), verbatim; nil otherwise.
    public var error: String?
    /// This item is the options' own speculation and drafter.
    public var selected: Bool

    public init(speculation: Speculation, speculativeDrafter: SpeculativeDrafter, status: TsffiStatus,
                plan: PlanResult?, error: String?, selected: Bool) {
        self.speculation = speculation
        self.speculativeDrafter = speculativeDrafter
        self.status = status
        self.plan = plan
        self.error = error
        self.selected = selected
    }

    /// A named block that cannot be served, or a drafter the open cannot
    /// build: grey the item out, with ``error``.
    public var isRefused: Bool { status == .refused }

    /// The plan call's outcome as a value: the plan, or the error it throws.
    public var result: Result<PlanResult, TsffiError> {
        if let plan {
            return .success(plan)
        }
        return .failure(TsffiError(status: status, message: error ?? "",
                                        function: "tsffi_speculation_plan"))
    }

    private enum CodingKeys: String, CodingKey {
        case speculation, speculativeDrafter, status, plan, error, selected
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(speculation, forKey: .speculation)
        try container.encode(speculativeDrafter, forKey: .speculativeDrafter)
        try container.encode(status, forKey: .status)
        if let plan {
            try plan.encodeAsItem(to: container.superEncoder(forKey: .plan))
        } else {
            try container.encodeNil(forKey: .plan)
        }
        try container.encode(error, forKey: .error)
        try container.encode(selected, forKey: .selected)
    }
}
