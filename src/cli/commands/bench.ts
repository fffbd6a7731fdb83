import { UsageError } from '../usage';

export async function benchCommand(_argv: string[]): Promise<number> {
  throw new UsageError('"inflab bench" is not built yet');
}
