/**
 * Quoting a log's text into outputs. A file's content must never carry a secret into a notebook:
 * whatever is quoted is cut to what a finding needs and has key-shaped tokens redacted (API keys
 * by their usual prefixes, bearer and Authorization values, `NAME_KEY=…`/`token: …` assignments,
 * URL passwords, JWTs, and long opaque runs of letters and digits).
 */
import { redact } from '../bench/client';

const KEY_SHAPED: [RegExp, string][] = [
  // name=value where the name says secret: INFLAB_API_KEY=…, "token": "…", password: …
  [
    /((?:api[_-]?key|apikey|access[_-]?key|secret|token|passw(?:or)?d|pwd|credential|auth)[\w-]*["']?\s*[=:]\s*["']?)[^\s"'&,;)}\]]{4,}/gi,
    '$1[redacted]',
  ],
  [/\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}/g, '[redacted]'],
  [/\b(?:hf|gh[pousr]|glpat|xox[abpr])[_-][A-Za-z0-9_-]{16,}/g, '[redacted]'],
  [/\bAKIA[0-9A-Z]{16}\b/g, '[redacted]'],
  [/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, '[redacted]'],
  [/(\/\/[^/\s:@]{1,64}:)[^@\s/]{1,200}@/g, '$1[redacted]@'],
  // A long opaque token (32+ letters and digits, with both).
  [/\b(?=[A-Za-z0-9+/_-]*\d)(?=[A-Za-z0-9+/_-]*[A-Za-z])[A-Za-z0-9+/_-]{32,}={0,2}/g, '[redacted]'],
];

/** Redact key-shaped tokens (and the bearer/Authorization forms the bench redacts). */
export function redactSecrets(text: string): string {
  let s = redact(text);
  for (const [re, to] of KEY_SHAPED) s = s.replace(re, to);
  return s;
}

/** A piece of a log line fit to quote: control characters shown as spaces, cut to `max`, redacted. */
export function quoteLine(text: string, max = 120): string {
  // Redact before the cut: a cut through a key would leave part of it unrecognised.
  const clean = redactSecrets(text.slice(0, max + 512).replace(/[\x00-\x08\x0b-\x1f\x7f]/g, ' '));
  return clean.length > max ? clean.slice(0, max) + '…' : clean;
}
