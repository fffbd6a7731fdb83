/**
 * Time: "MM-DD HH:MM:SS" has no year. Seconds are counted from the first stamp; a stamp that jumps
 * back by more than half a year is the year rolling over (12-31 → 01-01).
 */

export class LogClock {
  private year = 2000; // a leap year, so 02-29 parses
  origin?: number;
  private last = -Infinity;
  // A stamp as printed, or (from the byte scanner) its ten digits MMDDhhmmss as a number.
  private first?: string | number;
  private latest?: string | number;
  rollovers = 0;
  get firstStamp(): string | undefined {
    return stampText(this.first);
  }
  get lastStamp(): string | undefined {
    return stampText(this.latest);
  }
  /** Seconds since the first stamp, monotonic across midnight and new year. */
  private dayKey = -1;
  private dayBase = 0;
  seconds(month: number, day: number, secOfDay: number, stamp: string | number): number {
    const key = month * 32 + day;
    if (key !== this.dayKey) {
      this.dayKey = key;
      this.dayBase = Date.UTC(this.year, month - 1, day) / 1000;
      if (this.dayBase + secOfDay < this.last - 183 * 86400) {
        this.year++;
        this.rollovers++;
        this.dayBase = Date.UTC(this.year, month - 1, day) / 1000;
      }
    }
    const abs = this.dayBase + secOfDay;
    if (this.origin === undefined) {
      this.origin = abs;
      this.first = stamp;
    }
    // Lines from several processes may interleave a second out of order; never step back.
    if (abs > this.last) this.last = abs;
    this.latest = stamp;
    return this.last - this.origin;
  }
}

/** "MM-DD HH:MM:SS" from a printed stamp or its ten digits. */
function stampText(s: string | number | undefined): string | undefined {
  if (typeof s !== 'number') return s;
  const d = String(s).padStart(10, '0');
  return `${d.slice(0, 2)}-${d.slice(2, 4)} ${d.slice(4, 6)}:${d.slice(6, 8)}:${d.slice(8, 10)}`;
}
