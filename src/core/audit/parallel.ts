/**
 * Tensor, pipeline and data parallelism as the log shows them: in the process prefixes vLLM puts
 * on each line (`(EngineCore_DP1 pid=N)` an engine of data parallel rank 1, `(Worker_TP0 pid=N)`,
 * `(Worker_PP1_TP3 pid=N)`, `(Worker_DP0_EP0 pid=N)`, older `(VllmWorker rank=2 pid=N)`, Ray's
 * `(RayWorkerWrapper pid=N, ip=10.0.0.2)`), in the engine-config line's
 * `tensor_parallel_size=…, pipeline_parallel_size=…` and in the stats lines' `Engine NNN: `.
 * Data-parallel engines each have their own KV pool and stats windows; tensor-parallel workers of
 * one engine each print the same pool (deduplicated).
 */

export interface ParallelFacts {
  /** Sizes where the log shows them (max rank + 1, or the config line's value). */
  tp?: number;
  pp?: number;
  dp?: number;
  ep?: number;
  /** Distinct worker processes seen (TP × PP workers of all engines). */
  workers: number;
  /** Distinct hosts (Ray workers' ip=). */
  nodes?: number;
  /** Where each size came from. */
  sources: string[];
}

export class ParallelTracker {
  private names = new Set<string>();
  private tpMax = -1;
  private ppMax = -1;
  private dpMax = -1;
  private epMax = -1;
  private rankMax = -1;
  private workers = new Set<string>();
  private ips = new Set<string>();
  private config: { tp?: number; pp?: number; dp?: number } = {};
  private statsEngines = -1;
  private sources = new Set<string>();

  /** The text inside a process prefix's parentheses, e.g. "Worker_PP1_TP3 pid=12" (each distinct one once). */
  noteProcess(inside: string): void {
    if (this.names.has(inside) || this.names.size > 4096) return;
    this.names.add(inside);
    const name = inside.slice(0, inside.lastIndexOf(' pid=') >>> 0 || inside.length);
    const pid = /pid=(\d+)/.exec(inside)?.[1] ?? '';
    const ip = /\bip=([\w.:-]+)/.exec(inside)?.[1];
    const num = (re: RegExp) => {
      const m = re.exec(name);
      return m ? Number(m[1]) : -1;
    };
    const tp = num(/(?:^|_)TP(\d+)/);
    const pp = num(/(?:^|_)PP(\d+)/);
    const dp = num(/(?:^|_)DP(\d+)/);
    const ep = num(/(?:^|_)EP(\d+)/);
    const rank = num(/^VllmWorker rank=(\d+)/);
    if (rank >= 0) {
      this.seen('ranks', 'VllmWorker rank=n');
      this.rankMax = Math.max(this.rankMax, rank);
    }
    if (tp >= 0) {
      this.seen('tp', name);
      this.tpMax = Math.max(this.tpMax, tp);
    }
    if (pp >= 0) {
      this.seen('pp', name);
      this.ppMax = Math.max(this.ppMax, pp);
    }
    if (dp >= 0) {
      this.seen('dp', name);
      this.dpMax = Math.max(this.dpMax, dp);
    }
    if (ep >= 0) {
      this.seen('ep', name);
      this.epMax = Math.max(this.epMax, ep);
    }
    if (/^(?:Worker|VllmWorker|RayWorkerWrapper)(?:_|\s|$)/.test(name)) this.workers.add(`${name}|${pid}|${ip ?? ''}`);
    if (ip) this.ips.add(ip);
  }

  private seen(kind: string, name: string): void {
    if (this.sources.size < 16) this.sources.add(`${kind} from (${name.replace(/(TP|PP|DP|EP)\d+/g, '$1n')})`);
  }

  noteConfig(c: { tp?: number; pp?: number; dp?: number }): void {
    this.config = { ...this.config, ...c };
  }

  noteStatsEngine(engine: number): void {
    this.statsEngines = Math.max(this.statsEngines, engine);
  }

  /** The data-parallel rank a process prefix names, if any ("EngineCore_DP1", "EngineCore_1", "Worker_DP1_EP0"). */
  static dpRank(process: string | undefined): number | undefined {
    if (!process) return undefined;
    const m = /(?:^|_)DP(\d+)/.exec(process) ?? /^EngineCore_(\d+)$/.exec(process);
    return m ? Number(m[1]) : undefined;
  }

  facts(): ParallelFacts {
    const src = [...this.sources];
    const pick = (fromNames: number, cfg: number | undefined, label: string) => {
      if (fromNames >= 0) return fromNames + 1;
      if (cfg !== undefined) {
        src.push(`${label} from the engine config line`);
        return cfg;
      }
      return undefined;
    };
    const out: ParallelFacts = { workers: this.workers.size, sources: src };
    const tp = pick(this.tpMax, this.config.tp, 'tp');
    const pp = pick(this.ppMax, this.config.pp, 'pp');
    let dp = pick(this.dpMax, this.config.dp, 'dp');
    if (this.statsEngines >= 1 && (dp ?? 1) < this.statsEngines + 1) {
      dp = this.statsEngines + 1;
      src.push('dp from the stats lines (Engine NNN)');
    }
    if (tp !== undefined) out.tp = tp;
    if (pp !== undefined) out.pp = pp;
    if (dp !== undefined) out.dp = dp;
    if (this.epMax >= 0) out.ep = this.epMax + 1;
    if (this.ips.size) out.nodes = this.ips.size;
    // Numbered workers without TP names: ranks count TP × PP workers of one engine.
    if (out.tp === undefined && out.pp === undefined && this.rankMax >= 1) out.tp = this.rankMax + 1;
    return out;
  }
}
