/** The registry of cell kinds: a new kind is one module plus one line here. */
import type { KindModule } from '../engine/types';
import { decodeRooflineKind } from './predictDecodeRoofline';
import { setupKind } from './setup';

export const KINDS: KindModule[] = [setupKind, decodeRooflineKind];
