package pylogq.spark.jvm;

import java.util.ArrayList;
import java.util.List;

/**
 * The arrays a task reads segment chunks into, used again once no row points into them.
 *
 * <p>Rows keep pointing into the chunk they were decoded from until the batch they are in is
 * consumed, so a chunk cannot be overwritten by the next read. But once Spark asks for the next
 * batch, every chunk but the one being decoded is free: {@link #recycle} says so, and later reads
 * take those arrays instead of new ones, which the JVM would have to allocate and zero (a large
 * read would otherwise zero as many bytes as it reads).
 */
final class ChunkPool {
    private static final int KEEP = 4;

    private final List<byte[]> free = new ArrayList<>();
    private final List<byte[]> lent = new ArrayList<>();

    /** An array of at least {@code n} bytes, its contents undefined. */
    byte[] take(int n) {
        for (int i = free.size() - 1; i >= 0; i--) {
            byte[] a = free.get(i);
            if (a.length >= n) {
                free.remove(i);
                lent.add(a);
                return a;
            }
        }
        byte[] a = new byte[n];
        lent.add(a);
        return a;
    }

    /** Every array lent but {@code current} (the chunk still being decoded, or null) is free again. */
    void recycle(byte[] current) {
        for (byte[] a : lent) {
            if (a != current && free.size() < KEEP) {
                free.add(a);
            }
        }
        lent.clear();
        if (current != null) {
            lent.add(current);
        }
    }
}
