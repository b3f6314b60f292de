import Dispatch

extension TurboSpark {
    /// Every call of ``TurboSpark`` as `async`, run off the caller's actor.
    ///
    /// A first call starts the embedded runtime (~15 ms) and a first plan of a
    /// 100,000-entry install reads its index (~35 ms): a SwiftUI pane must not
    /// make either on the main actor. Each function here is `@concurrent`, so
    /// it runs on the global concurrent executor whatever actor awaits it, and
    /// makes the synchronous call there -- so the last error is still read on
    /// the thread that made the call. Separate names rather than `async`
    /// overloads of the synchronous functions: in an async context Swift
    /// prefers an async overload, which would turn every existing synchronous
    /// call there into a compile error.
    public enum Background {
        /// ``TurboSpark/speculationPlan(modelDir:options:)``, off the caller's actor.
        @concurrent
        public static func speculationPlan(modelDir: String, options: Options = .default)
            async throws(TurboSparkError) -> PlanResult
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.speculationPlan(modelDir: modelDir, options: options)
            }
        }

        /// ``TurboSpark/speculationPlan(modelDir:optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func speculationPlan(modelDir: String, optionsJSON: String?)
            async throws(TurboSparkError) -> PlanResult
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.speculationPlan(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/speculationChoices(modelDir:options:)``, off the caller's actor.
        @concurrent
        public static func speculationChoices(modelDir: String, options: Options = .default)
            async throws(TurboSparkError) -> SpeculationChoices
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.speculationChoices(modelDir: modelDir, options: options)
            }
        }

        /// ``TurboSpark/speculationChoices(modelDir:optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func speculationChoices(modelDir: String, optionsJSON: String?)
            async throws(TurboSparkError) -> SpeculationChoices
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.speculationChoices(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/resolveDrafter(modelDir:options:)``, off the caller's actor.
        @concurrent
        public static func resolveDrafter(modelDir: String, options: Options = .default)
            async throws(TurboSparkError) -> DrafterChoice
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.resolveDrafter(modelDir: modelDir, options: options)
            }
        }

        /// ``TurboSpark/draftPolicies(choice:options:)``, off the caller's actor.
        @concurrent
        public static func draftPolicies(choice: DrafterChoice, options: Options = .default)
            async throws(TurboSparkError) -> DraftPolicies
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.draftPolicies(choice: choice, options: options)
            }
        }

        /// ``TurboSpark/resolveSpeculation(options:)``, off the caller's actor.
        @concurrent
        public static func resolveSpeculation(options: Options = .default)
            async throws(TurboSparkError) -> SpeculationPlan
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.resolveSpeculation(options: options)
            }
        }

        /// ``TurboSpark/installInfo(modelDir:)``, off the caller's actor.
        @concurrent
        public static func installInfo(modelDir: String) async throws(TurboSparkError) -> InstallInfo {
            try offActor { () throws(TurboSparkError) in try TurboSpark.installInfo(modelDir: modelDir) }
        }

        /// ``TurboSpark/buildInfo()``, off the caller's actor.
        @concurrent
        public static func buildInfo() async throws(TurboSparkError) -> BuildInfo {
            try offActor { () throws(TurboSparkError) in try TurboSpark.buildInfo() }
        }

        /// ``TurboSpark/speculationPlanJSON(modelDir:optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func speculationPlanJSON(modelDir: String, optionsJSON: String?)
            async throws(TurboSparkError) -> String
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.speculationPlanJSON(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/speculationChoicesJSON(modelDir:optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func speculationChoicesJSON(modelDir: String, optionsJSON: String?)
            async throws(TurboSparkError) -> String
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.speculationChoicesJSON(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/resolveDrafterJSON(modelDir:optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func resolveDrafterJSON(modelDir: String, optionsJSON: String?)
            async throws(TurboSparkError) -> String
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.resolveDrafterJSON(modelDir: modelDir, optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/draftPoliciesJSON(choiceJSON:optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func draftPoliciesJSON(choiceJSON: String, optionsJSON: String?)
            async throws(TurboSparkError) -> String
        {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.draftPoliciesJSON(choiceJSON: choiceJSON, optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/resolveSpeculationJSON(optionsJSON:)``, off the caller's actor.
        @concurrent
        public static func resolveSpeculationJSON(optionsJSON: String?) async throws(TurboSparkError) -> String {
            try offActor { () throws(TurboSparkError) in
                try TurboSpark.resolveSpeculationJSON(optionsJSON: optionsJSON)
            }
        }

        /// ``TurboSpark/installInfoJSON(modelDir:)``, off the caller's actor.
        @concurrent
        public static func installInfoJSON(modelDir: String) async throws(TurboSparkError) -> String {
            try offActor { () throws(TurboSparkError) in try TurboSpark.installInfoJSON(modelDir: modelDir) }
        }

        /// ``TurboSpark/buildInfoJSON()``, off the caller's actor.
        @concurrent
        public static func buildInfoJSON() async throws(TurboSparkError) -> String {
            try offActor { () throws(TurboSparkError) in try TurboSpark.buildInfoJSON() }
        }

        /// Every library call of this namespace goes through here. The check
        /// holds the promise, not just the attribute: were these functions
        /// ever to run on the main queue (a change of isolation defaults),
        /// it stops there rather than freeze a GUI.
        private static func offActor<T>(_ body: () throws(TurboSparkError) -> T) throws(TurboSparkError) -> T {
            dispatchPrecondition(condition: .notOnQueue(.main))
            return try body()
        }
    }
}
