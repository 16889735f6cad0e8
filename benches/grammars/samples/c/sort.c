// Insertion sort and binary search over an int array.
void insertion_sort(int *a, int n)
{
    int i, j, key;
    for (i = 1; i < n; i++) {
        key = a[i];
        j = i - 1;
        while (j >= 0 && a[j] > key) {
            a[j + 1] = a[j];
            j = j - 1;
        }
        a[j + 1] = key;
    }
}

int binary_search(const int *a, int n, int x)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (a[mid] == x)
            return mid;
        else if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

unsigned long hash(const char *s)
{
    unsigned long h = 5381;
    int c;
    while ((c = *s++))
        h = ((h << 5) + h) ^ c;
    return h & 0xffffffff;
}

double mean(const double *xs, size_t n)
{
    double sum = 0.0;
    size_t i;
    for (i = 0; i < n; ++i) sum += xs[i];
    return n ? sum / (double)n : 0.0;
}
