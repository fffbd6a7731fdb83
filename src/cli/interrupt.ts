/**
 * Ctrl-C: the first SIGINT asks the run to stop where it can keep its results (the handler), a
 * second one ends the process at once. Returns the function that removes the handler.
 */
export function onInterrupt(handler: () => void): () => void {
  let seen = false;
  const on = () => {
    if (seen) process.exit(130);
    seen = true;
    handler();
  };
  process.on('SIGINT', on);
  return () => process.off('SIGINT', on);
}
