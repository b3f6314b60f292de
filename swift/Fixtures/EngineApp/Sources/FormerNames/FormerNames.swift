// The public names SpeculationPreview declared before it had names of its own
// (module TurboSparkFFI): a namespace `enum TurboSpark` and an error
// `TurboSparkError`. Imported by EngineAppFormerNames only, to show the app
// fails to compile with them (tests/test_engine_app.py).
public enum TurboSpark {}

public struct TurboSparkError: Error {}
