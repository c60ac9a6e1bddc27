// Rounds of asking several gateways (or replicas) the same question, with the moments the test
// acted marked between them: a verdict about who learnt what first is then an ordering of rounds
// and marks, not a difference of clock readings. Pure; the asking loop lives in each test.

/** One round: what each one answered, asked one after the other. */
export type Round = Readonly<Record<string, string>>;

interface Mark {
  /** Rounds that had ended when the test acted: every one of them was asked before. */
  readonly ended: number;
  /** Rounds that had begun: every later one was asked wholly after. */
  readonly begun: number;
}

export class AskRounds {
  readonly rounds: Round[] = [];
  private inProgress = false;
  private readonly marks = new Map<string, Mark>();

  /** A round begins (before its first question). */
  begin(): void {
    this.inProgress = true;
  }

  /** The round ends with these answers. */
  push(round: Round): void {
    this.rounds.push(round);
    this.inProgress = false;
  }

  /** Marks that the test has just done `what`. */
  mark(what: string): void {
    this.marks.set(what, { ended: this.rounds.length, begun: this.rounds.length + (this.inProgress ? 1 : 0) });
  }

  /** The index of the first round asked wholly after `what`. */
  after(what: string): number {
    return this.get(what).begun;
  }

  /** How many rounds were asked wholly before `what`: indexes below this one. */
  before(what: string): number {
    return this.get(what).ended;
  }

  private get(what: string): Mark {
    const m = this.marks.get(what);
    if (m === undefined) throw new Error(`no mark "${what}"`);
    return m;
  }
}

/** The index of the first round at or after `from` that satisfies pred; -1 if none does. */
export function firstRound(rounds: readonly Round[], pred: (r: Round) => boolean, from = 0): number {
  for (let i = Math.max(0, from); i < rounds.length; i++) if (pred(rounds[i] as Round)) return i;
  return -1;
}

/** What `who` answered, in order, each run of the same answer once: "503 → 200 → 503". */
export function transitions(rounds: readonly Round[], who: string): string[] {
  const out: string[] = [];
  for (const r of rounds) {
    const a = r[who];
    if (a !== undefined && out.at(-1) !== a) out.push(a);
  }
  return out;
}
