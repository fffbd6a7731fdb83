import { UsageError } from '../usage';

export async function simCommand(_argv: string[]): Promise<number> {
  throw new UsageError('"inflab sim" is not built yet');
}
