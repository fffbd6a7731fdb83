/** The registry of cell kinds: a new kind is one module plus one line here. */
import type { KindModule } from '../engine/types';
import { auditKind } from './audit';
import { auditEnvironmentKind } from './auditEnvironment';
import { benchRateKind, benchSweepKind } from './bench';
import { benchCapacityKind } from './benchCapacity';
import { decodeRooflineKind } from './predictDecodeRoofline';
import { compareKind } from './compare';
import { recordKind } from './record';
import { floorsKind } from './predictFloors';
import { importKind } from './import';
import { kvPoolKind } from './predictKvPool';
import { rooflineKind } from './predictRoofline';
import { servingKind } from './predictServing';
import { speculativeKind } from './predictSpeculative';
import { setupKind } from './setup';

export const KINDS: KindModule[] = [
  setupKind,
  decodeRooflineKind,
  floorsKind,
  kvPoolKind,
  rooflineKind,
  recordKind,
  compareKind,
  servingKind,
  speculativeKind,
  auditKind,
  auditEnvironmentKind,
  benchSweepKind,
  benchRateKind,
  benchCapacityKind,
  importKind,
];
