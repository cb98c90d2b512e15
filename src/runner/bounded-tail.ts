// The last `limit` bytes of a stream, and how many came before them. A child that writes gigabytes costs the
// runner at most `limit` bytes of memory.
export class BoundedTail {
  private chunks: Buffer[] = [];
  private held = 0;
  dropped = 0;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.held += chunk.length;
    while (this.held > this.limit) {
      const excess = this.held - this.limit;
      const head = this.chunks[0];
      if (head.length <= excess) {
        this.chunks.shift();
        this.held -= head.length;
        this.dropped += head.length;
      } else {
        this.chunks[0] = head.subarray(excess);
        this.held -= excess;
        this.dropped += excess;
      }
    }
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
