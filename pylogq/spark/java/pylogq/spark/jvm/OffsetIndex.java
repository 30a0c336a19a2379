package pylogq.spark.jvm;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * A segment's offset index, its trustworthy entries only: the JVM twin of the Python reader's
 * {@code _read_index}.
 *
 * <p>Read with plain reads (never mapped: the broker may trim the file under us). The active
 * segment's index is preallocated and zero past its entries, and after a crash any index may
 * be stale, so entries count only while offsets and positions strictly increase and positions
 * lie inside the log file as sized by the caller. An entry {@code (offset, position)} says the
 * batch at {@code position} ends with {@code offset}.
 */
final class OffsetIndex {
    static final OffsetIndex EMPTY = new OffsetIndex(new long[0], new long[0], 0);

    final long[] offsets;
    final long[] positions;
    final int size;

    private OffsetIndex(long[] offsets, long[] positions, int size) {
        this.offsets = offsets;
        this.positions = positions;
        this.size = size;
    }

    /** The index of the last entry whose offset is at or below {@code target} (-1: none). */
    int floor(long target) {
        int i = Arrays.binarySearch(offsets, 0, size, target);
        return i >= 0 ? i : -i - 2;
    }

    /** The index of the first entry whose offset is at or above {@code target} ({@link #size}: none). */
    int ceiling(long target) {
        int i = Arrays.binarySearch(offsets, 0, size, target);
        return i >= 0 ? i : -i - 1;
    }

    static OffsetIndex read(SegmentWalk.Segment segment, long logSize) {
        String path = segment.path;
        int cut = path.lastIndexOf(".log");
        String indexPath = path.substring(0, cut) + ".index" + path.substring(cut + 4);
        byte[] raw = entries(indexPath);
        int n = raw.length / 8;
        if (n == 0) {
            return EMPTY;
        }
        long[] offsets = new long[n];
        long[] positions = new long[n];
        int kept = 0;
        int lastRel = 0;
        int lastPos = 0;
        for (int i = 0; i < n; i++) {
            int rel = readInt(raw, 8 * i);
            int pos = readInt(raw, 8 * i + 4);
            if (i == 0 ? rel < 0 || pos < 0 : rel <= lastRel || pos <= lastPos) {
                break;
            }
            if (pos >= logSize) {
                break;  // positions past the sized file do not count
            }
            offsets[kept] = segment.base + rel;
            positions[kept] = pos;
            kept++;
            lastRel = rel;
            lastPos = pos;
        }
        return new OffsetIndex(offsets, positions, kept);
    }

    private static int readInt(byte[] b, int at) {
        return ((b[at] & 0xff) << 24) | ((b[at + 1] & 0xff) << 16) | ((b[at + 2] & 0xff) << 8) | (b[at + 3] & 0xff);
    }

    /**
     * The entries of an index file up to its zero-filled tail (none when it cannot be read):
     * reading stops at the first all-zero entry after the first, in reads that double from
     * 64 KiB, so a read costs about what the entries take.
     */
    private static byte[] entries(String path) {
        try (InputStream in = Files.newInputStream(Paths.get(path))) {
            byte[] out = new byte[0];
            int want = 64 * 1024;
            boolean first = true;
            while (true) {
                byte[] piece = in.readNBytes(want);
                int whole = piece.length / 8 * 8;
                if (whole == 0) {
                    return out;
                }
                int zero = -1;
                for (int e = first ? 1 : 0; e < whole / 8; e++) {
                    boolean allZero = true;
                    for (int b = 8 * e; b < 8 * e + 8; b++) {
                        if (piece[b] != 0) {
                            allZero = false;
                            break;
                        }
                    }
                    if (allZero) {
                        zero = e;
                        break;
                    }
                }
                int keep = zero >= 0 ? zero * 8 : whole;
                byte[] joined = Arrays.copyOf(out, out.length + keep);
                System.arraycopy(piece, 0, joined, out.length, keep);
                out = joined;
                if (zero >= 0 || piece.length < want) {
                    return out;
                }
                first = false;
                want = Math.min(want * 2, 16 << 20);
            }
        } catch (NoSuchFileException e) {
            return new byte[0];
        } catch (IOException e) {
            return new byte[0];  // (as the Python reader: an index that cannot be read is no index)
        }
    }
}
