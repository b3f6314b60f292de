import Tsffi
import Foundation
import Testing
import SpeculationPreview

/// Calls from many Swift tasks (and plain threads) at once agree with the
/// single-threaded answers, errors included: the last error is per thread
/// and each failing call reads its own.
@Suite struct ConcurrencyTests {
    static let shapes = ["none": "", "mtp": "mtp=True", "dflash": "dflash=True",
                         "both": "mtp=True, dflash=True", "moe": "experts=8, dflash=True"]
    static let optionSet: [Options] = [
        Options(),
        Options(speculation: .block(2)),
        Options(speculation: .off),
        Options(drafter: .dflash),
        Options(drafter: .dflash, speculation: .block(3)),
        Options(drafter: .dflash, speculation: .block(2), temperature: 0.8),
        Options(drafter: .mtp, speculation: .block(16)),
        Options(engineBlocker: .reason("engine busy")),
        Options(temperature: -2),  // refused: invalid argument
    ]

    struct Case: Sendable, Hashable {
        let modelDir: String
        let options: Options
    }

    static func cases(_ dirs: [String: String]) -> [Case] {
        dirs.keys.sorted().flatMap { name in optionSet.map { Case(modelDir: dirs[name]!, options: $0) } }
    }

    static func answer(_ c: Case) -> Outcome<PlanResult> {
        Outcome { try Tsffi.speculationPlan(modelDir: c.modelDir, options: c.options) }
    }

    @Test func taskGroupCallsAgreeWithTheSingleThreadedAnswer() async throws {
        let dirs = try Self.writeInstalls()
        defer { Self.remove(dirs) }
        let cases = Self.cases(dirs)
        let expected = cases.map(Self.answer)
        // Both outcomes occur, so both paths are exercised concurrently.
        #expect(expected.contains { if case .failed(let e) = $0 { e.isRefused } else { false } })
        #expect(expected.contains { if case .failed(let e) = $0 { e.status == TsffiStatus.invalidArgument } else { false } })
        #expect(expected.contains { if case .ok = $0 { true } else { false } })

        let tasks = 8, callsPerTask = 200
        let mismatches = await withTaskGroup(of: [String].self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var bad: [String] = []
                    for call in 0..<callsPerTask {
                        let i = (task * 7 + call) % cases.count
                        let got = Self.answer(cases[i])
                        if got != expected[i] {
                            bad.append("task \(task) call \(call) case \(i): \(got) != \(expected[i])")
                        }
                        if call % 50 == 0 {
                            await Task.yield()  // let tasks interleave and hop threads
                        }
                    }
                    return bad
                }
            }
            var all: [String] = []
            for await bad in group { all += bad }
            return all
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches, first: \(mismatches.prefix(3))")
    }

    @Test func eachConcurrentFailureReadsItsOwnMessage() async {
        // Every task fails with a message naming its own value, interleaved
        // with successes that clear the per-thread message.
        let tasks = 8, callsPerTask = 200
        let mismatches = await withTaskGroup(of: [String].self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var bad: [String] = []
                    for call in 0..<callsPerTask {
                        let value = -Double(task * 1000 + call + 1)
                        let outcome = Outcome {
                            try Tsffi.resolveSpeculation(options: Options(temperature: value))
                        }
                        guard case .failed(let error) = outcome,
                              error.status == TsffiStatus.invalidArgument,
                              error.message == "tsffi.temperature: got \(Int(value)); accepts a finite number "
                                  + ">= 0, or null (the engine binding's default temperature, 0.2)"
                        else {
                            bad.append("task \(task) call \(call): \(outcome)")
                            continue
                        }
                        let ok = Outcome {
                            try Tsffi.resolveSpeculation(options: Options(speculation: .block(call % 15 + 1)))
                        }
                        if ok != .ok(SpeculationPlan(block: call % 15 + 1, drafter: .mtp, reason: nil)) {
                            bad.append("task \(task) call \(call): \(ok)")
                        }
                    }
                    return bad
                }
            }
            var all: [String] = []
            for await bad in group { all += bad }
            return all
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatches, first: \(mismatches.prefix(3))")
    }

    @Test func plainThreadsAgreeToo() throws {
        // The cooperative pool may have as few threads as cores; a GUI also
        // calls from its own threads. Eight OS threads at once.
        let dirs = try Self.writeInstalls()
        defer { Self.remove(dirs) }
        let cases = Self.cases(dirs)
        let expected = cases.map(Self.answer)
        let collected = Collected()
        let threads = (0..<8).map { t in
            Thread {
                var bad = 0
                for call in 0..<100 {
                    let i = (t * 5 + call) % cases.count
                    if Self.answer(cases[i]) != expected[i] { bad += 1 }
                }
                collected.finish(bad)
            }
        }
        threads.forEach { $0.start() }
        #expect(collected.wait(for: threads.count, timeout: 120), "threads did not finish")
        #expect(collected.mismatches == 0)
    }

    // MARK: fixtures shared by the tests above

    static func writeInstalls() throws -> [String: String] {
        let root = FileManager.default.temporaryDirectory
            .appendingPathComponent("turbospark-swift-concurrency-\(UUID().uuidString)")
        var lines = ["from turbospark_ffi.install_writer import write_install"]
        var dirs: [String: String] = [:]
        for (name, kwargs) in shapes.sorted(by: { $0.key < $1.key }) {
            let dir = root.appendingPathComponent(name).path
            dirs[name] = dir
            lines.append("write_install('\(dir)'\(kwargs.isEmpty ? "" : ", " + kwargs))")
        }
        // Beside a valid manifest.json, so the open gets past it and refuses
        // the index (ABI 4).
        let garbage = root.appendingPathComponent("garbage")
        lines.append("write_install('\(garbage.path)')")
        try Fixtures.runPython(lines.joined(separator: "\n"))
        try Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 3) })
            .write(to: garbage.appendingPathComponent("model_weights.bin"))
        dirs["garbage"] = garbage.path
        return dirs
    }

    static func remove(_ dirs: [String: String]) {
        if let any = dirs.values.first {
            try? FileManager.default.removeItem(at: URL(fileURLWithPath: any).deletingLastPathComponent())
        }
    }
}

/// Results from plain threads, under a lock.
final class Collected: @unchecked Sendable {
    private let condition = NSCondition()
    private var finished = 0
    private var bad = 0

    func finish(_ mismatches: Int) {
        condition.lock()
        finished += 1
        bad += mismatches
        condition.broadcast()
        condition.unlock()
    }

    func wait(for count: Int, timeout: TimeInterval) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while finished < count {
            if !condition.wait(until: deadline) { return finished >= count }
        }
        return true
    }

    var mismatches: Int {
        condition.lock()
        defer { condition.unlock() }
        return bad
    }
}
