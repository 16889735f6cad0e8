#include <stdlib.h>

struct node {
    int value;
    struct node *next;
};

struct node *push(struct node *head, int value)
{
    struct node *n = (struct node *)malloc(sizeof(struct node));
    if (!n)
        return head;
    n->value = value;
    n->next = head;
    return n;
}

struct node *reverse(struct node *head)
{
    struct node *prev = NULL;
    while (head != NULL) {
        struct node *next = head->next;
        head->next = prev;
        prev = head;
        head = next;
    }
    return prev;
}

int length(struct node *head)
{
    int k = 0;
    for (; head; head = head->next) k++;
    return k;
}

void free_list(struct node *head)
{
    do {
        struct node *next = head ? head->next : NULL;
        free(head);
        head = next;
    } while (head);
}
