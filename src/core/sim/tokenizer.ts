/**
 * The simulated endpoint's tokenizer: one token per character, deterministic and reversible.
 *
 * Token id i is the Unicode code point i, except that ids from 0xD800 up are shifted past the
 * surrogate block (id i ↦ code point i + 0x800), so every id in [0, vocab) has a character and
 * detokenize(tokenize(s)) = s for any text whose code points map below the vocabulary size. Code
 * points beyond the vocabulary wrap around (id mod vocab): the one lossy case. A 1,000-token prompt
 * is therefore 1,000 characters; a list of token ids is taken as is.
 */

const SURROGATE_START = 0xd800;
const SURROGATE_SPAN = 0x800;

export function idToChar(id: number): string {
  const cp = id < SURROGATE_START ? id : id + SURROGATE_SPAN;
  return cp <= 0x10ffff ? String.fromCodePoint(cp) : '\ufffd';
}

export function tokenize(text: string, vocab: number): number[] {
  const ids: number[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    let id = cp < SURROGATE_START ? cp : cp >= SURROGATE_START + SURROGATE_SPAN ? cp - SURROGATE_SPAN : 0xfffd;
    if (id >= vocab) id %= vocab;
    ids.push(id);
  }
  return ids;
}

export function detokenize(ids: ArrayLike<number>): string {
  let s = '';
  for (let i = 0; i < ids.length; i++) s += idToChar(ids[i]);
  return s;
}

export interface ChatMessage {
  role: string;
  content?: string | null | { type: string; text?: string }[];
}

/** A ChatML-style template (Qwen's): each message framed by <|im_start|>role … <|im_end|>, then the assistant turn. */
export function chatPrompt(messages: ChatMessage[]): string {
  let s = '';
  for (const m of messages) {
    const c =
      typeof m.content === 'string'
        ? m.content
        : Array.isArray(m.content)
          ? m.content.map((p) => p.text ?? '').join('')
          : '';
    s += `<|im_start|>${m.role}\n${c}<|im_end|>\n`;
  }
  return s + '<|im_start|>assistant\n';
}
