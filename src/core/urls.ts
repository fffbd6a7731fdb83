/**
 * Endpoint URLs as keys and as text: the origin a key is stored under, and credentials (userinfo,
 * query values) kept out of everything shown or saved. InfLab sends no credential from a URL (a key
 * goes only in the Authorization header, from the host's key store): urlCredentials finds them so
 * that a cell or flag naming one is refused with a message, the URL shown redacted.
 */

/** scheme://host:port of an http(s) URL (lower-case, default port omitted); undefined otherwise. */
export function originOf(url: string): string | undefined {
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    return u.origin;
  } catch {
    return undefined;
  }
}

/** What a URL carries that is a credential, or would be read as one: userinfo, query values. */
export function urlCredentials(url: string): ('userinfo' | 'query')[] {
  const out: ('userinfo' | 'query')[] = [];
  try {
    const u = new URL(url);
    if (u.username || u.password) out.push('userinfo');
    if (u.search && u.search !== '?') out.push('query');
  } catch {
    if (/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]*@/i.test(url)) out.push('userinfo');
    if (/\?[^#\s]/.test(url)) out.push('query');
  }
  return out;
}

/** The URL with its userinfo and every query value replaced by "***" (names kept). */
export function redactUrl(url: string): string {
  return url
    .replace(/^([a-z][a-z0-9+.-]*:\/\/)([^/?#\s@]*@)/i, '$1***@')
    .replace(/([?&][^=&#\s]*)=[^&#\s]*/g, '$1=***');
}

/** Every http(s) URL inside a text, redacted (error messages that quote a URL). */
export function redactUrlsIn(text: string): string {
  return text.replace(/\bhttps?:\/\/[^\s"'<>`]+/gi, (u) => redactUrl(u));
}

/**
 * Why a URL the user wrote is refused, or undefined when it carries no credential. `what` names
 * it ("endpoint", "audit URL"); `keyHint` says where a key goes instead on this host.
 */
export function credentialRefusal(url: string, what: string, keyHint: string): string | undefined {
  const c = urlCredentials(url);
  if (!c.length) return undefined;
  const parts = c.map((x) => (x === 'userinfo' ? 'a user name or password' : 'a query (?…)')).join(' and ');
  return (
    `The ${what} ${redactUrl(url)} carries ${parts}; InfLab sends no credential from a URL and does not ` +
    `send the query either. Write it without them (scheme://host:port) and ${keyHint}`
  );
}
