import Dispatch

extension Tsffi {
    /// Every call of ``Tsffi`` as `async`, run off the caller's actor.
    ///
    /// A first call starts the embedded runtime (~15 ms) and a first plan of a
    /// 100,000-entry install reads its index (~35 ms): a SwiftUI pane must not
    /// make either on the main actor. Each function here runs on the global
    /// concurrent executor whatever actor awaits it, and makes the synchronous
    /// call there -- so the last error is still read on the thread that made
    /// the call. Up to Swift 6.1 that is what every nonisolated `async`
    /// function does (SE-0338); from 6.2 a module may make them run on the
    /// caller's actor instead (SE-0461, `NonisolatedNonsendingByDefault`), so
    /// there each one says `@concurrent` -- behind `#if compiler(>=6.2)`,
    /// since 6.0 and 6.1 do not know the attribute.
    ///
    /// Separate names rather than `async` overloads of the synchronous
    /// functions: in an async context Swift prefers an async overload, which
    /// would turn every existing synchronous call there into a compile error.
    public enum Background {
        /// ``Tsffi/speculationPlan(modelDir:options:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func speculationPlan(modelDir: String, options: Options = .default)
            async throws(TsffiError) -> PlanResult
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.speculationPlan(modelDir: modelDir, options: options)
            }
        }

        /// ``Tsffi/speculationPlan(modelDir:optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func speculationPlan(modelDir: String, optionsJSON: String?)
            async throws(TsffiError) -> PlanResult
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.speculationPlan(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/speculationChoices(modelDir:options:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func speculationChoices(modelDir: String, options: Options = .default)
            async throws(TsffiError) -> SpeculationChoices
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.speculationChoices(modelDir: modelDir, options: options)
            }
        }

        /// ``Tsffi/speculationChoices(modelDir:optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func speculationChoices(modelDir: String, optionsJSON: String?)
            async throws(TsffiError) -> SpeculationChoices
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.speculationChoices(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/resolveDrafter(modelDir:options:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func resolveDrafter(modelDir: String, options: Options = .default)
            async throws(TsffiError) -> DrafterChoice
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.resolveDrafter(modelDir: modelDir, options: options)
            }
        }

        /// ``Tsffi/draftPolicies(choice:options:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func draftPolicies(choice: DrafterChoice, options: Options = .default)
            async throws(TsffiError) -> DraftPolicies
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.draftPolicies(choice: choice, options: options)
            }
        }

        /// ``Tsffi/resolveSpeculation(options:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func resolveSpeculation(options: Options = .default)
            async throws(TsffiError) -> SpeculationPlan
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.resolveSpeculation(options: options)
            }
        }

        /// ``Tsffi/installInfo(modelDir:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func installInfo(modelDir: String) async throws(TsffiError) -> InstallInfo {
            try offActor { () throws(TsffiError) in try Tsffi.installInfo(modelDir: modelDir) }
        }

        /// ``Tsffi/store()``, off the caller's actor (it reads the store's file).
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func store() async throws(TsffiError) -> Store {
            try offActor { () throws(TsffiError) in try Tsffi.store() }
        }

        /// ``Tsffi/buildInfo()``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func buildInfo() async throws(TsffiError) -> BuildInfo {
            try offActor { () throws(TsffiError) in try Tsffi.buildInfo() }
        }

        /// ``Tsffi/speculationPlanJSON(modelDir:optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func speculationPlanJSON(modelDir: String, optionsJSON: String?)
            async throws(TsffiError) -> String
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.speculationPlanJSON(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/speculationChoicesJSON(modelDir:optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func speculationChoicesJSON(modelDir: String, optionsJSON: String?)
            async throws(TsffiError) -> String
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.speculationChoicesJSON(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/resolveDrafterJSON(modelDir:optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func resolveDrafterJSON(modelDir: String, optionsJSON: String?)
            async throws(TsffiError) -> String
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.resolveDrafterJSON(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/draftPoliciesJSON(choiceJSON:optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func draftPoliciesJSON(choiceJSON: String, optionsJSON: String?)
            async throws(TsffiError) -> String
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.draftPoliciesJSON(choiceJSON: choiceJSON, optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/resolveSpeculationJSON(optionsJSON:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func resolveSpeculationJSON(optionsJSON: String?) async throws(TsffiError) -> String {
            try offActor { () throws(TsffiError) in
                try Tsffi.resolveSpeculationJSON(optionsJSON: optionsJSON)
            }
        }

        /// ``Tsffi/installInfoJSON(modelDir:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func installInfoJSON(modelDir: String) async throws(TsffiError) -> String {
            try offActor { () throws(TsffiError) in try Tsffi.installInfoJSON(modelDir: modelDir) }
        }

        /// ``Tsffi/storeJSON()``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func storeJSON() async throws(TsffiError) -> String {
            try offActor { () throws(TsffiError) in try Tsffi.storeJSON() }
        }

        /// ``Tsffi/buildInfoJSON()``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func buildInfoJSON() async throws(TsffiError) -> String {
            try offActor { () throws(TsffiError) in try Tsffi.buildInfoJSON() }
        }

        /// ``Tsffi/reconcile(modelDir:optionsJSON:engine:)``, off the caller's actor.
        #if compiler(>=6.2)
        @concurrent
        #endif
        public static func reconcile(modelDir: String, optionsJSON: String?, engine: EngineReport)
            async throws(TsffiError) -> Reconciliation
        {
            try offActor { () throws(TsffiError) in
                try Tsffi.reconcile(modelDir: modelDir, optionsJSON: optionsJSON, engine: engine)
            }
        }

        /// Every library call of this namespace goes through here. The check
        /// holds the promise, not just the attribute: were these functions
        /// ever to run on the main queue (a change of isolation defaults),
        /// it stops there rather than freeze a GUI.
        private static func offActor<T>(_ body: () throws(TsffiError) -> T) throws(TsffiError) -> T {
            dispatchPrecondition(condition: .notOnQueue(.main))
            return try body()
        }
    }
}
