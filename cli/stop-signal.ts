// Ctrl-C (SIGINT) or SIGTERM for a command that runs until told to stop (`trine events --follow`,
// `trine dashboard`): the signal ends the command's wait at once, the command finishes its
// loop, cleans up and exits 0. `release()` removes the handlers (in the command's `finally`).

export class StopSignal {
  requested = false;
  private wake: (() => void) | null = null;
  private readonly onSignal = (): void => {
    this.requested = true;
    this.wake?.();
  };

  constructor() {
    process.once('SIGINT', this.onSignal);
    process.once('SIGTERM', this.onSignal);
  }

  /** Resolves when `ms` passed, or at once when a signal comes. */
  pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wake = null;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  release(): void {
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
  }
}
