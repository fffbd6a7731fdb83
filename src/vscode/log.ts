/** The "InfLab" output channel: what went wrong (a failed cell, a sim that did not start, an analysis error), with the time. */
import * as vscode from 'vscode';

let channel: vscode.LogOutputChannel | undefined;

export function inflabLog(): vscode.LogOutputChannel {
  channel ??= vscode.window.createOutputChannel('InfLab', { log: true });
  return channel;
}
